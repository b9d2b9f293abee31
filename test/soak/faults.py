"""The faults the soak strikes, one :class:`FaultKind` per fault of a real GPU cluster's life.

Each kind is built on a primitive of the local cluster (:mod:`pkg.devcluster`: the control plane's,
a real node's, a simulated host's, the supervisor's) and knows nothing of the workload or the
invariants. ``strike()`` does the fault and names what it hit; a durational fault (a full plugin
folder, a node cut off, a card off the bus) lasts ``duration`` seconds, then ``heal()`` undoes it.
Faults aimed at one node, component or card take the next one in turn at each strike, so every
round reaches a different target.

A primitive this checkout does not have yet makes its fault fail with :class:`PrimitiveMissingError`,
which the report shows as a failed strike: a soak that skipped a fault silently, or faked it,
would report a recovery that never happened.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.gpuhost import nvidia_cards
from soak.cluster import DRA_REPLICAS, SoakCluster, SoakNode

# The driver a reload alternates with the one the nodes booted with (the stand-in user space is
# built for any version string; the simulated NVML reports whichever was loaded last).
OTHER_DRIVER_VERSION = "580.95.05"


class PrimitiveMissingError(RuntimeError):
    """The local cluster has no primitive for this fault (yet)."""


def primitive(owner: object, name: str) -> Callable[..., Any]:
    """``owner.name``, or :class:`PrimitiveMissingError` naming it."""
    found = getattr(owner, name, None)
    if found is None:
        raise PrimitiveMissingError(f"primitive missing: {type(owner).__name__}.{name} (pkg/devcluster)")
    if not callable(found):
        raise PrimitiveMissingError(f"primitive {type(owner).__name__}.{name} is not callable")
    return found  # type: ignore[no-any-return]


class FaultKind(ABC):
    """One kind of fault; ``involved`` names the components whose logs a violation after it shows."""

    name: ClassVar[str]
    duration: ClassVar[float] = 0.0  # seconds between strike and heal; 0: an instant fault

    def __init__(self, cluster: SoakCluster) -> None:
        self.cluster = cluster
        self.involved: list[str] = []

    @abstractmethod
    def strike(self) -> str:
        """Does the fault; returns what it hit."""

    def heal(self) -> None:
        """Undoes a durational fault (an instant one heals by itself)."""
        return


class _Rotating(FaultKind):
    """A fault aimed at one node at a time, the next one at each strike."""

    def __init__(self, cluster: SoakCluster) -> None:
        super().__init__(cluster)
        self._turns: Iterator[int] = itertools.cycle(range(len(cluster.nodes)))
        self.target: SoakNode | None = None

    def start_at(self, index: int) -> None:
        """Begins the turns at node ``index`` (modulo the nodes), so that kinds struck once each, as
        in the smoke run, do not all hit the first node."""
        count = len(self.cluster.nodes)
        self._turns = itertools.cycle([(index + n) % count for n in range(count)])

    def next_node(self) -> SoakNode:
        self.target = self.cluster.nodes[next(self._turns)]
        self.involved = self.target.component_names
        return self.target

    def current(self) -> SoakNode:
        assert self.target is not None, f"{self.name}: heal before strike"
        return self.target


class KillController(FaultKind):
    name = "kill-gpu-controller"

    def strike(self) -> str:
        self.involved = ["gpu-controller"]
        primitive(self.cluster.supervisor, "kill")("gpu-controller")
        return "gpu-controller"


class KillDraLeader(FaultKind):
    """kill -9 of the gpu-dra-controller replica that leads, so the other one takes the Lease."""

    name = "kill-gpu-dra-controller"

    def __init__(self, cluster: SoakCluster) -> None:
        super().__init__(cluster)
        self._turns = itertools.cycle(DRA_REPLICAS)

    def strike(self) -> str:
        leader = self.cluster.dra_leader()
        victim = leader if leader is not None else next(self._turns)
        self.involved = list(DRA_REPLICAS)
        primitive(self.cluster.supervisor, "kill")(victim)
        return victim if leader is not None else f"{victim} (no leader seen)"


class _KillNodeComponent(_Rotating):
    component: ClassVar[str]

    def strike(self) -> str:
        node = self.next_node()
        victim = f"{self.component}[{node.name}]"
        primitive(self.cluster.supervisor, "kill")(victim)
        return victim


class KillHandler(_KillNodeComponent):
    name = "kill-gpu-handler"
    component = "gpu-handler"


class KillNodeAgent(_KillNodeComponent):
    name = "kill-gpu-node-agent"
    component = "gpu-node-agent"


class RestartApiserver(FaultKind):
    name = "restart-apiserver"

    def strike(self) -> str:
        self.involved = self.cluster.component_names
        primitive(self.cluster.plane, "restart_apiserver")(crash=True)
        return "kube-apiserver"


class RestartEtcd(FaultKind):
    name = "restart-etcd"

    def strike(self) -> str:
        self.involved = self.cluster.component_names
        primitive(self.cluster.plane, "restart_etcd")(crash=True)
        return "etcd"


class RestartKubelet(_Rotating):
    name = "restart-kubelet"

    def strike(self) -> str:
        node = self.next_node()
        primitive(node.node, "restart_kubelet")(crash=True)
        return f"kubelet[{node.name}]"


class RestartContainerd(_Rotating):
    name = "restart-containerd"

    def strike(self) -> str:
        node = self.next_node()
        primitive(node.node, "restart_containerd")(crash=True)
        return f"containerd[{node.name}]"


class RebootNode(_Rotating):
    """What a reboot does to a node: our components on it die with everything else (SIGKILL, as a
    power cut; a graceful stop took seconds in which short Pods finished and none could start, so a
    reboot found hardly a container to kill) and start after it, as their Pods would (the
    supervisor must not restart them meanwhile)."""

    name = "reboot-node"

    def strike(self) -> str:
        node = self.next_node()
        reboot = primitive(node.node, "reboot")
        with primitive(self.cluster.supervisor, "paused")(*node.component_names) as processes:
            for process in reversed(processes):
                process.kill()
            reboot()
        return node.name


class PluginFolderFull(_Rotating):
    name = "plugin-folder-full"
    duration = 20.0

    def strike(self) -> str:
        node = self.next_node()
        primitive(node.node, "fill_plugin_folder")()
        return node.name

    def heal(self) -> None:
        primitive(self.current().node, "free_plugin_folder")()


class ApiCut(_Rotating):
    """One node cut off from the API server for 30 s (its kubelet and our components on it)."""

    name = "api-cut"
    duration = 30.0

    def strike(self) -> str:
        node = self.next_node()
        primitive(self._link(node), "cut")()
        return node.name

    def heal(self) -> None:
        primitive(self._link(self.current()), "restore")()

    def _link(self, node: SoakNode) -> object:
        link = getattr(node.node, "api_link", None)
        if link is None:
            raise PrimitiveMissingError(
                f"primitive missing: node {node.name} has no api_link (NodeConfig.api_link)"
            )
        return link


class CardOffBus(_Rotating):
    """A card falls off the bus (XID 79, NVML answers GPU_IS_LOST) and comes back ~20 s later;
    each strike takes the next node and, on it, the next card."""

    name = "card-off-bus"
    duration = 20.0

    def __init__(self, cluster: SoakCluster) -> None:
        super().__init__(cluster)
        self._struck: dict[str, int] = {}
        self._card: str | None = None

    def strike(self) -> str:
        """Passes over a node whose cards are all bound to another driver (a VM host's, bound to
        vfio-pci at boot): such a card is not the nvidia driver's to lose."""
        for _ in self.cluster.nodes:
            node = self.next_node()
            if cards := nvidia_cards(node.node.host.root):
                break
        else:
            raise RuntimeError("no soak node has a card bound to the nvidia driver to unplug")
        turn = self._struck.get(node.name, 0)
        self._card = cards[turn % len(cards)]
        self._struck[node.name] = turn + 1
        primitive(node.node.host, "unplug_card")(self._card)
        return f"{node.name} {self._card}"

    def heal(self) -> None:
        assert self._card is not None
        primitive(self.current().node.host, "replug_card")(self._card)


class DriverReload(_Rotating):
    """The driver root's files replaced by another version's, as a driver upgrade does; the next
    strike on the same node goes back."""

    name = "driver-reload"

    def __init__(
        self, cluster: SoakCluster, versions: Sequence[str] = (OTHER_DRIVER_VERSION, DRIVER_VERSION)
    ) -> None:
        super().__init__(cluster)
        self._versions = list(versions)
        self._loaded: dict[str, int] = {}

    def strike(self) -> str:
        node = self.next_node()
        turn = self._loaded.get(node.name, 0)
        version = self._versions[turn % len(self._versions)]
        primitive(node.components, "reload_driver")(version)
        self._loaded[node.name] = turn + 1
        return f"{node.name} {version}"


KINDS: tuple[type[FaultKind], ...] = (
    KillController,
    KillDraLeader,
    KillHandler,
    KillNodeAgent,
    RestartApiserver,
    RestartEtcd,
    RestartKubelet,
    RestartContainerd,
    RebootNode,
    PluginFolderFull,
    ApiCut,
    CardOffBus,
    DriverReload,
)


def all_kinds(cluster: SoakCluster) -> dict[str, FaultKind]:
    """One of each kind; the node faults start their turns at different nodes."""
    faults = {kind.name: kind(cluster) for kind in KINDS}
    for index, fault in enumerate(f for f in faults.values() if isinstance(f, _Rotating)):
        fault.start_at(index)
    return faults


def durations() -> dict[str, float]:
    return {kind.name: kind.duration for kind in KINDS}
