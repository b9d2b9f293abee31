"""``gpu-controller``: PhysicalGPU conditions (DriverReady from the GPU validator),
orphan cleanup and inventory metrics; the node gate labels; the node components' DaemonSets;
GPUClass → DeviceClass; and ComputeDomains (their channels, claim templates and IMEX daemons).

Namespaced objects it reads and writes (the configuration ConfigMap, the DaemonSets, the
validator's Pods, the IMEX daemons and the channel ledger) live in one namespace, ``--components-namespace`` (default ``$POD_NAMESPACE``,
the controller's own), so its RBAC there is a Role, not a cluster-wide grant.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence

from pkg.app.options import add_manager_flags, manager_options
from pkg.app.runtime import RuntimeContainer, run_controllers
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.transforms import FieldSetSharer
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.gpucontroller.computedomain.setup import ComputeDomainContainer
from pkg.gpucontroller.computedomain.setup import setup_controller as setup_compute_domains
from pkg.gpucontroller.gpuclass.setup import GPUClassContainer
from pkg.gpucontroller.gpuclass.setup import setup_controller as setup_gpu_classes
from pkg.gpucontroller.nodelabels.setup import NodeLabelsContainer
from pkg.gpucontroller.nodelabels.setup import setup_controller as setup_node_labels
from pkg.gpucontroller.orchestrator.setup import OrchestratorContainer
from pkg.gpucontroller.orchestrator.setup import setup_controller as setup_orchestrator
from pkg.gpucontroller.physicalgpu.setup import PhysicalGPUContainer
from pkg.gpucontroller.physicalgpu.setup import setup_controller as setup_physical_gpus
from pkg.gpucontroller.projections import PhysicalGPUInterner, project_node, project_physical_gpu

COMPONENT = "gpu-controller"
DEFAULT_OPERATOR_CONFIG = "gpu-control-plane"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def dns_label(value: str) -> str:
    """The configuration's name labels and prefixes what it renders: a DNS label, at most 63."""
    if not _DNS_LABEL.match(value):
        raise argparse.ArgumentTypeError(
            f"expected a DNS label (lower-case, digits, '-', at most 63), got {value!r}"
        )
    return value


def register_controllers(
    manager: Manager,
    *,
    client: KubeClient,
    informers: InformerFactory,
    recorder: EventRecorderLogger,
    workers: int,
    components_namespace: str,
    operator_config: str,
) -> None:
    """Registers gpu-controller's five controllers on ``manager``.

    Its caches of the cluster-sized kinds (PhysicalGPUs, Nodes) keep a projection of what its
    controllers read, with repeating values shared (``pkg.gpucontroller.projections``): at 5,000
    nodes they are most of the process. Set before any controller asks for an informer, as the
    factory requires."""
    informers.set_transform(PHYSICAL_GPU, project_physical_gpu)
    informers.set_object_transform(PHYSICAL_GPU, PhysicalGPUInterner())
    informers.set_transform(NODE, project_node)
    informers.set_object_transform(NODE, FieldSetSharer())
    shared = {"client": client, "informers": informers}
    gpus = PhysicalGPUContainer(**shared, recorder=recorder)
    gpus.config.workers.from_value(workers)
    gpus.config.components_namespace.from_value(components_namespace)
    setup_physical_gpus(manager, gpus)
    setup_node_labels(manager, NodeLabelsContainer(**shared))
    orchestrator = OrchestratorContainer(**shared, recorder=recorder)
    orchestrator.config.components_namespace.from_value(components_namespace)
    orchestrator.config.operator_config.from_value(operator_config)
    setup_orchestrator(manager, orchestrator)
    setup_gpu_classes(manager, GPUClassContainer(**shared, recorder=recorder))
    domains = ComputeDomainContainer(**shared)
    domains.config.components_namespace.from_value(components_namespace)
    domains.config.operator_config.from_value(operator_config)
    setup_compute_domains(manager, domains)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMPONENT, description=__doc__)
    add_manager_flags(parser, default_lease="gpu-controller-leader")
    parser.add_argument(
        "--components-namespace",
        type=dns_label,
        default=os.environ.get("COMPONENTS_NAMESPACE") or os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the node components: their configuration ConfigMap, DaemonSets and the "
        "GPU validator's Pods (default $POD_NAMESPACE)",
    )
    parser.add_argument(
        "--operator-config",
        type=dns_label,
        default=os.environ.get("OPERATOR_CONFIG", DEFAULT_OPERATOR_CONFIG),
        help="name of the ConfigMap whose config.yaml (a GPUOperatorConfig) says which node "
        "components run; their DaemonSets are named <this>-<component>",
    )
    args = parser.parse_args(argv)
    options = manager_options(args)

    def setup(runtime: RuntimeContainer, manager: Manager) -> Callable[[], None]:
        register_controllers(
            manager,
            client=runtime.client(),
            informers=runtime.informers(),
            recorder=runtime.recorder(),
            workers=options.workers,
            components_namespace=args.components_namespace,
            operator_config=args.operator_config,
        )
        return runtime.recorder().stop

    return run_controllers(
        component=COMPONENT,
        options=options,
        setup=setup,
        log_extra={
            "leader_elect": options.leader_elect,
            "components_namespace": args.components_namespace,
            "operator_config": args.operator_config,
        },
    )


if __name__ == "__main__":
    sys.exit(main())
