"""``gpu-controller``: PhysicalGPU conditions (DriverReady from the GPU validator),
orphan cleanup and inventory metrics; the node gate labels; the node components' DaemonSets;
GPUClass → DeviceClass; and ComputeDomains (their channels and claim templates) with the IMEX
daemon ensembles of their NVLink cliques. ``--controllers`` picks which of them run.

Namespaced objects it reads and writes (the configuration ConfigMap, the DaemonSets, the
validator's Pods, the IMEX daemons and the channel ledger) live in one namespace,
``--components-namespace`` (default ``$POD_NAMESPACE``, the controller's own), so its RBAC there
is a Role, not a cluster-wide grant.
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
from pkg.gpucontroller.imexensemble.setup import EnsembleContainer
from pkg.gpucontroller.imexensemble.setup import setup_controller as setup_ensembles
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
CONTROLLERS = ("physicalgpu", "nodelabels", "orchestrator", "gpuclass", "computedomain")
"""The names ``--controllers`` knows; ``computedomain`` is the domains' controller and the IMEX
ensembles' (a domain is never ready without its clique's ensemble)."""


def controller_selection(value: str) -> frozenset[str]:
    """kube-controller-manager's form: a name runs that controller, ``-name`` keeps it off, ``*``
    runs every controller not kept off. An unknown name is refused, listing the known ones."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    known = f"known: *, {', '.join(CONTROLLERS)}"
    if not items:
        raise argparse.ArgumentTypeError(f"no controller named; {known}")
    for item in items:
        if item != "*" and item.removeprefix("-") not in CONTROLLERS:
            raise argparse.ArgumentTypeError(f"unknown controller {item!r}; {known}")
    off = {item[1:] for item in items if item.startswith("-")}
    on = set(CONTROLLERS) if "*" in items else {item for item in items if not item.startswith("-")}
    return frozenset(on - off)


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
    controllers: frozenset[str] = frozenset(CONTROLLERS),
) -> None:
    """Registers the chosen ones of gpu-controller's controllers on ``manager`` (default: all).

    Its caches of the cluster-sized kinds (PhysicalGPUs, Nodes) keep a projection of what its
    controllers read, with repeating values shared (``pkg.gpucontroller.projections``): at 5,000
    nodes they are most of the process. Set before any controller asks for an informer, as the
    factory requires."""
    informers.set_transform(PHYSICAL_GPU, project_physical_gpu)
    informers.set_object_transform(PHYSICAL_GPU, PhysicalGPUInterner())
    informers.set_transform(NODE, project_node)
    informers.set_object_transform(NODE, FieldSetSharer())
    shared = {"client": client, "informers": informers}
    if "physicalgpu" in controllers:
        gpus = PhysicalGPUContainer(**shared, recorder=recorder)
        gpus.config.workers.from_value(workers)
        gpus.config.components_namespace.from_value(components_namespace)
        setup_physical_gpus(manager, gpus)
    if "nodelabels" in controllers:
        setup_node_labels(manager, NodeLabelsContainer(**shared))
    if "orchestrator" in controllers:
        orchestrator = OrchestratorContainer(**shared, recorder=recorder)
        orchestrator.config.components_namespace.from_value(components_namespace)
        orchestrator.config.operator_config.from_value(operator_config)
        setup_orchestrator(manager, orchestrator)
    if "gpuclass" in controllers:
        setup_gpu_classes(manager, GPUClassContainer(**shared, recorder=recorder))
    if "computedomain" in controllers:
        domains = ComputeDomainContainer(**shared)
        domains.config.components_namespace.from_value(components_namespace)
        domains.config.operator_config.from_value(operator_config)
        setup_compute_domains(manager, domains)
        ensembles = EnsembleContainer(**shared)
        ensembles.config.components_namespace.from_value(components_namespace)
        ensembles.config.operator_config.from_value(operator_config)
        setup_ensembles(manager, ensembles)


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
    parser.add_argument(
        "--controllers",
        type=controller_selection,
        default=frozenset(CONTROLLERS),
        help="which controllers run, kube-controller-manager style: a comma list of names, '*' for "
        f"all, '-name' to drop one (default '*'; known: {', '.join(CONTROLLERS)})",
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
            controllers=args.controllers,
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
            "controllers": sorted(args.controllers),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
