"""Composition root of gpu-node-agent.

The container declares how the parts are built from the agent's settings and the process runtime
(client, informer factory); :func:`setup_agent` wires them into a manager: the two informers (this
node's PhysicalGPUs by label selector, this Node by field selector; nothing else is
listed or watched), the write barriers on them, the single-worker controller running the sync, and
the sources that wake it. There is no leader election: one agent runs per node and owns that node's objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dependency_injector import containers, providers
from kubernetes.client import V1Node

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.backends import default_registry
from pkg.domain.informers import node_named, node_physical_gpus
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.source import PeriodicSource, Source, StartSource
from pkg.framework.jitter import Jitter
from pkg.framework.manager.manager import Manager
from pkg.hardware.labels import to_label_value
from pkg.hardware.pciids import PciIds
from pkg.inventory.host_info import FileHostInfoReader
from pkg.inventory.pci_scanner import SysfsPciScanner
from pkg.nodeagent.internal.handler import ApplyHandler, CleanupHandler, DiscoverHandler, NodeLabelsHandler
from pkg.nodeagent.internal.service import CacheBarrier, KubeWriter
from pkg.nodeagent.internal.source import UdevSource
from pkg.nodeagent.internal.state import StateFactory, SyncState
from pkg.nodeagent.internal.watch import gpu_events, node_events
from pkg.nodeagent.reconciler import SYNC, NodeSyncReconciler, SyncFailedError

CONTROLLER_NAME = "node-agent"
# A failed sync is retried after 0.5 s, 1 s, 2 s, ... at most 5 minutes apart.
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class AgentSettings:
    node_name: str
    sysfs_root: Path
    host_root: Path
    pci_ids: Path | None  # None: the first of pkg.hardware.pciids.DEFAULT_PATHS
    resync_period: float
    resync_jitter: float = 0.2
    udev: bool = True

    @property
    def node_label(self) -> str:
        """The node's value of ``gpu.deckhouse.io/node`` (node names may exceed 63 characters)."""
        return to_label_value(self.node_name)


def new_state_factory(
    *, settings: AgentSettings, gpus: SharedInformer[PhysicalGPU], nodes: SharedInformer[V1Node]
) -> StateFactory:
    """Snapshots the caches; the label check is a second guard behind the informer's selector."""

    def build() -> SyncState:
        mine = [
            g for g in gpus.store.list() if (g.metadata.labels or {}).get(LABEL_NODE) == settings.node_label
        ]
        return SyncState(
            node_name=settings.node_name,
            node_label=settings.node_label,
            existing=mine,
            node=nodes.store.get_by_key(settings.node_name),
        )

    return build


class NodeAgentContainer(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=AgentSettings)
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)

    gpu_informer = providers.Singleton(
        node_physical_gpus, informers=informers, node_label=settings.provided.node_label
    )
    node_informer = providers.Singleton(
        node_named, informers=informers, node_name=settings.provided.node_name
    )
    gpu_barrier = providers.Singleton(CacheBarrier, name="physicalgpus")
    node_barrier = providers.Singleton(CacheBarrier, name="node")
    writer = providers.Singleton(
        KubeWriter,
        client,  # the writer checks the client's field manager, so it takes the client itself
        node_name=settings.provided.node_name,
        gpu_barrier=gpu_barrier,
        node_barrier=node_barrier,
    )
    vendors = providers.Singleton(default_registry)
    pci_names = providers.Singleton(PciIds.load, settings.provided.pci_ids)
    scanner = providers.Singleton(SysfsPciScanner, settings.provided.sysfs_root)
    host_info = providers.Singleton(
        FileHostInfoReader, host_root=settings.provided.host_root, sysfs_root=settings.provided.sysfs_root
    )
    handlers = providers.List(
        providers.Singleton(
            DiscoverHandler, scanner=scanner, host_info=host_info, vendors=vendors, names=pci_names
        ),
        providers.Singleton(ApplyHandler, writer=writer),
        providers.Singleton(CleanupHandler, writer=writer),
        providers.Singleton(NodeLabelsHandler, writer=writer),
    )
    state_factory = providers.Singleton(
        new_state_factory, settings=settings, gpus=gpu_informer, nodes=node_informer
    )
    reconciler = providers.Singleton(
        NodeSyncReconciler,
        node_name=settings.provided.node_name,
        state_factory=state_factory,
        handlers=handlers,
        cache=writer,
    )


def setup_agent(
    manager: Manager, container: NodeAgentContainer, *, extra_sources: Sequence[Source] = ()
) -> Controller:
    """Registers the sync controller and everything that wakes it with ``manager``.

    Every wake-up is a watch of the controller mapped to the one ``sync`` request: the two
    informers (with their predicates), the start, the jittered periodic resync, PCI uevents, and
    ``extra_sources`` (the process adds SIGHUP, whose handler only the main thread may install).
    """
    settings: AgentSettings = container.settings()
    gpus, nodes = container.gpu_informer(), container.node_informer()
    gpus.add_listener(container.gpu_barrier())
    nodes.add_listener(container.node_barrier())
    sync = EnqueueRequestsFromMapFunc(lambda _obj: [SYNC])
    builder = (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .watches(gpus, sync, predicates=[gpu_events()])
        .watches(nodes, sync, predicates=[node_events()])
        .watches(StartSource(), sync)  # taken once the caches have synced
        .watches(
            PeriodicSource(
                name="periodic-resync",
                every=Jitter(period=settings.resync_period, jitter=settings.resync_jitter),
            ),
            sync,
        )
        .without_leader_election()
        .backoff(base=RETRY_BASE_SECONDS, max_delay=RETRY_MAX_SECONDS)
        .expected_errors(ApiError, OSError, SyncFailedError)
    )
    if settings.udev:
        builder.watches(UdevSource(), sync)
    for source in extra_sources:
        builder.watches(source, sync)
    return builder.complete(container.reconciler())
