"""The soak's cluster: the local control plane, real nodes of several GPU models, and our components
under a supervisor, as the e2e tier and ``make demo`` start them (test/e2e/conftest.py,
hack/demo.py), with what the faults need on top.

* Four real nodes (kubelet + containerd each) over simulated GPU hosts, between them every kind of
  GPU Pod we offer: ``a30-x3`` (MIG and TimeSlicing/MPS shares), ``h100-and-l4`` (whole cards and
  shares), ``t4-vgpu`` (vGPU for VM Pods), ``rtx-workstation`` (a whole card passed to a VM Pod
  through VFIO). Each node reaches the API server through its own :class:`ApiLink` (so one node can
  be cut off alone) and keeps the kubelet plugin's folder on a small tmpfs (so it can be filled).
* gpu-controller (the validator flow marks the cards DriverReady, as on a real cluster), two
  gpu-dra-controller replicas contending for one Lease (so killing the leader moves leadership),
  and per node gpu-node-agent and gpu-handler: all host processes kept running by a
  :class:`~pkg.devcluster.supervisor.Supervisor`, which restarts them with CrashLoop backoff as a
  kubelet restarts a Pod's containers, and records which restarts the soak caused.
* The machine's real-node lock is held for the whole run, and at the end every node must have left
  nothing behind (:meth:`RealNode.leftovers`, the host-wide :class:`Footprint`), as in the e2e tier.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes.client import V1Namespace, V1ObjectMeta

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import (
    CONTROLLERS,
    NODE_CONTROLLERS,
    ControlPlane,
    ControlPlaneConfig,
    default_bin_dir,
)
from pkg.devcluster.footprint import Footprint
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.gpustack import GpuStack
from pkg.devcluster.hostlock import exclusive_host
from pkg.devcluster.images import build_archive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import ManagedProcess, free_port, wait_until
from pkg.devcluster.supervisor import Supervisor
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NAMESPACE
from pkg.framework.client.config import new_api_client

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
SAMPLE_CLASSES = ROOT / "config" / "samples" / "deviceclasses.yaml"
COMPONENTS_NAMESPACE = "gpu-system"
OPERATOR_CONFIG = "gpu-operator-config"
DRA_REPLICAS = ("gpu-dra-controller-0", "gpu-dra-controller-1")
PLUGIN_FOLDER_MIB = 16  # the kubelet plugin's folder: room for the checkpoint, small enough to fill


@dataclass(frozen=True)
class NodeSpec:
    name: str
    fixture: str  # test/fixtures/sysfs/<fixture>
    cards: int  # the PhysicalGPUs its node agent reports


# Short names: the kubelet plugin's sockets live under the node's folder, and a unix socket's path
# holds at most 107 bytes.
NODES = (
    NodeSpec("soak-a30", "a30-x3", 3),
    NodeSpec("soak-h100", "h100-and-l4", 2),
    NodeSpec("soak-vgpu", "t4-vgpu", 2),
    NodeSpec("soak-ws", "rtx-workstation", 1),
)


@dataclass
class SoakNode:
    """One real node and our components on it."""

    spec: NodeSpec
    node: RealNode
    components: GpuComponents

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def component_names(self) -> list[str]:
        return [process.name for process in self.components.processes]


def node_config(spec: NodeSpec, *, missing: list[str]) -> NodeConfig:
    """The node's configuration with the fault hooks this checkout's :class:`NodeConfig` has; the
    ones it lacks are added to ``missing`` (their faults then fail saying so, nothing is faked)."""
    wanted: dict[str, Any] = {"api_link": True, "plugin_folder_mib": PLUGIN_FOLDER_MIB}
    known = {f.name for f in dataclasses.fields(NodeConfig)}
    missing += [f"NodeConfig.{name}" for name in wanted if name not in known]
    return NodeConfig(
        name=spec.name,
        gpu_fixture=FIXTURES / "sysfs" / spec.fixture,
        **{name: value for name, value in wanted.items() if name in known},
    )


class SoakCluster:
    """Everything the soak runs against; :func:`soak_cluster` starts and stops it."""

    def __init__(self, work: Path, *, specs: tuple[NodeSpec, ...] = NODES) -> None:
        self.work = work
        self.specs = specs
        self.plane = ControlPlane(
            ControlPlaneConfig(
                bin_dir=default_bin_dir(),
                work_dir=work / "cluster",
                controllers=CONTROLLERS + NODE_CONTROLLERS,
            )
        )
        self.supervisor = Supervisor()
        self.nodes: list[SoakNode] = []
        self.controllers: list[ManagedProcess] = []
        self.metrics: dict[str, str] = {}  # controller -> its /metrics URL
        self.missing: list[str] = []  # fault hooks this checkout lacks
        self._kube: KubeClient | None = None
        self._stack = GpuStack(
            plane=self.plane,
            work=work,
            namespace=COMPONENTS_NAMESPACE,
            config=OPERATOR_CONFIG,
            config_key=OPERATOR_CONFIG_KEY,
            pci_ids=FIXTURES / "pci.ids",
            driver_version=DRIVER_VERSION,
        )

    @property
    def kube(self) -> KubeClient:
        assert self._kube is not None, "start the cluster first"
        return self._kube

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, say: Callable[[str], None]) -> None:
        say("control plane (etcd, kube-apiserver, scheduler, controller manager) and our CRDs")
        self.plane.start()
        self.plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
        self.plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        self._kube = KubeClient(new_api_client(str(self.plane.kubeconfig)), field_manager="soak")
        self.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=COMPONENTS_NAMESPACE)))
        images = build_archive(self.work / "images.tar")
        for index, spec in enumerate(self.specs):
            say(f"real node {spec.name} over the simulated host {spec.fixture}")
            node = RealNode(
                config=node_config(spec, missing=self.missing),
                plane=self.plane,
                index=index,
                images=images,
                work_dir=self.work / "nodes",
            )
            self.nodes.append(SoakNode(spec, node, self._node_components(node)))
            node.start()
        say("gpu-controller, two gpu-dra-controller replicas, gpu-node-agent and gpu-handler per node")
        self._stack.create_config(self.kube, self.work / "nodes")
        self.controllers = [self._controller(), *(self._dra_controller(name) for name in DRA_REPLICAS)]
        self.supervisor.supervise(*self.controllers)
        for soak_node in self.nodes:
            self.supervisor.supervise(*soak_node.components.processes)
        self.supervisor.start()
        self.plane.kubectl("apply", "-f", str(SAMPLE_CLASSES))
        for soak_node in self.nodes:
            wait_for_offers(
                self.plane, soak_node.name, cards=soak_node.spec.cards, mark_ready=False, timeout=240
            )
            soak_node.components.wait_registered(timeout=120)
        say("every node's cards are DriverReady and offered; the kubelets registered gpu-handler")

    def stop(self) -> list[str]:
        """Stops everything; returns what the nodes left on the machine (empty when clean)."""
        self.supervisor.stop(processes=False)
        # Uninstall first, as the demo does: without gpu-controller and its DaemonSets nothing
        # recreates the node components' stand-in Pods while the nodes wait for their Pods to go.
        for process in reversed(self.controllers):
            process.stop()
        self.plane.kubectl(
            "delete", "daemonsets", "--all", "-n", COMPONENTS_NAMESPACE, "--wait=false", check=False
        )
        # Every Pod goes while gpu-handler still runs to unprepare its devices; then our node
        # components stop (a node's stop would kill them as its strays), then the nodes.
        self.plane.kubectl("delete", "pods", "-A", "--all", "--wait=false", check=False)
        with contextlib.suppress(TimeoutError):
            wait_until(
                lambda: not self.plane.kubectl("get", "pods", "-A", "-o", "name", check=False).strip(),
                timeout=120,
                what="every Pod to go",
            )
        leftovers: list[str] = []
        for soak_node in reversed(self.nodes):
            soak_node.components.stop()
            soak_node.node.stop()
            leftovers += [f"{soak_node.name}: {item}" for item in soak_node.node.leftovers()]
            soak_node.node.remove_files()
        self.plane.stop()
        return leftovers

    # -- what faults and the run read ------------------------------------------------------------

    @property
    def component_names(self) -> list[str]:
        """Our components, controllers first."""
        return [p.name for p in self.controllers] + [n for s in self.nodes for n in s.component_names]

    def logs(self) -> dict[str, Path]:
        """Every process's log: ours, the nodes' kubelets and containerds, the control plane's."""
        found = {p.name: p.log_path for p in self.controllers}
        for soak_node in self.nodes:
            found |= soak_node.components.logs()
            found |= soak_node.node.logs()  # their processes' names hold the node's
        return found | self.plane.logs()

    def save_logs(self, target: Path) -> None:
        """Copies every log to ``target`` (the nodes' folders go when they stop)."""
        target.mkdir(parents=True, exist_ok=True)
        for name, path in self.logs().items():
            with contextlib.suppress(OSError):
                shutil.copyfile(path, target / f"{name}.log")

    def node(self, name: str) -> SoakNode:
        for soak_node in self.nodes:
            if soak_node.name == name:
                return soak_node
        raise KeyError(f"no soak node {name} (nodes: {', '.join(s.name for s in self.nodes)})")

    def dra_leader(self) -> str | None:
        """The gpu-dra-controller replica that holds the Lease now, by its own leader metric."""
        for name in DRA_REPLICAS:
            try:
                with urllib.request.urlopen(self.metrics[name], timeout=3) as response:
                    text = response.read().decode()
            except OSError:
                continue
            for line in text.splitlines():
                leading = line.rsplit(" ", 1)[-1].strip() in ("1", "1.0")
                if "leader_election_master_status" in line and not line.startswith("#") and leading:
                    return name
        return None

    def events(self, *, around: float, window: float = 30.0) -> str:
        """``kubectl get events -A`` within ``window`` seconds of ``around`` (epoch seconds)."""
        out = self.plane.kubectl("get", "events", "-A", "-o", "json", check=False)
        try:
            items = json.loads(out).get("items", []) if out else []
        except ValueError:
            return ""
        lines = []
        for event in items:
            stamp = (
                event.get("lastTimestamp")
                or event.get("eventTime")
                or event["metadata"].get("creationTimestamp")
            )
            if not stamp:
                continue
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            if abs(when - around) <= window:
                involved = event.get("involvedObject") or {}
                lines.append(
                    (
                        when,
                        f"{datetime.fromtimestamp(when, UTC):%H:%M:%S} {event.get('type', '')} "
                        f"{event.get('reason', '')} {involved.get('kind', '')}/"
                        f"{involved.get('namespace', '')}/{involved.get('name', '')}: "
                        f"{event.get('message', '')}".strip(),
                    )
                )
        return "\n".join(text for _, text in sorted(lines))

    # -- internals -------------------------------------------------------------------------------

    def _node_components(self, node: RealNode) -> GpuComponents:
        return GpuComponents(
            node=node, plane=self.plane, pci_ids=FIXTURES / "pci.ids", driver_version=DRIVER_VERSION
        )

    def _process(self, name: str, module: str, *args: str) -> ManagedProcess:
        port = free_port()
        self.metrics[name] = f"http://127.0.0.1:{port}/metrics"
        return ManagedProcess(
            name=name,
            argv=[
                sys.executable,
                "-m",
                module,
                f"--kubeconfig={self.plane.kubeconfig}",
                f"--metrics-bind-address=127.0.0.1:{port}",
                f"--leader-election-namespace={COMPONENTS_NAMESPACE}",
                *args,
            ],
            log_path=self.work / "logs" / f"{name}.log",
            env={"LOG_LEVEL": "Info"},
        )

    def _controller(self) -> ManagedProcess:
        """gpu-controller, as :meth:`GpuStack.start_controller` runs it (the validator flow)."""
        return self._process(
            "gpu-controller",
            "pkg.app.gpu_controller",
            f"--components-namespace={COMPONENTS_NAMESPACE}",
            f"--operator-config={OPERATOR_CONFIG}",
        )

    def _dra_controller(self, name: str) -> ManagedProcess:
        """One gpu-dra-controller replica; both contend for the chart's one Lease."""
        return self._process(name, "pkg.app.gpu_dra_controller")


@contextlib.contextmanager
def soak_cluster(
    work: Path, say: Callable[[str], None], leftovers: list[str], *, logs: Path
) -> Iterator[SoakCluster]:
    """Holds the real-node lock, starts the cluster, and at the end copies every log to ``logs``,
    stops the cluster and adds to ``leftovers`` whatever the nodes left on the machine."""
    with exclusive_host(on_wait=say):
        footprint = Footprint.take()
        cluster = SoakCluster(work)
        try:
            cluster.start(say)
            yield cluster
        finally:
            say(f"stopping the cluster (its logs: {logs})")
            cluster.save_logs(logs)
            leftovers += cluster.stop()
            leftovers += [f"host entry {path}" for path in footprint.new_entries()]
            shutil.rmtree(work, ignore_errors=True)
