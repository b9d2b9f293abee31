"""Composition root of the gpu-handler (spec §10.4 item 1).

The container declares how the parts are built from the handler's settings and the process
runtime (client, informer factory); :func:`setup_handler` wires them into a manager. Today that is
the enrichment (spec §2.2.1): one informer of this node's PhysicalGPUs (label selector
``gpu.deckhouse.io/node=<node>``; DESIGN §7: only this node's objects are listed or watched), a
controller with one request per card, and the vendor backend chosen by entry point name. The ResourceSlice
publisher (:mod:`pkg.gpuhandler.publishing`) joins in :func:`setup_handler` with one line, reading
the cards through ``container.card_specs()`` (:class:`~pkg.gpuhandler.card_specs.CardSpecProvider`),
and so does the kubelet plugin (:mod:`pkg.gpuhandler.preparation`), which tells the enrichment
through a channel source when a Prepare changed a card's mode (:class:`CardNudges`).

There is no leader election: one handler runs per node and writes only that node's objects.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dependency_injector import containers, providers

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import BackendError, BackendOptions, VendorBackend, VendorRegistry, default_registry
from pkg.domain.informers import node_physical_gpus
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.source import ChannelSource
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler
from pkg.framework.reconcile.conditions import now_utc
from pkg.framework.reconcile.contract import Request
from pkg.gpuhandler.card_specs import CardSpecs
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.health.monitor import HealthMonitor
from pkg.gpuhandler.health.reporting import HealthReporter
from pkg.gpuhandler.internal.handler import (
    ApplyHandler,
    CardSpecHandler,
    EnrichHandler,
    HealthHandler,
    ReadinessHandler,
)
from pkg.gpuhandler.internal.service import KubeStatusWriter
from pkg.gpuhandler.internal.state import EnrichmentState
from pkg.gpuhandler.internal.watch import gpu_events
from pkg.gpuhandler.preparation.checkpoint import CheckpointFile
from pkg.gpuhandler.preparation.prepared_devices import PreparedDevicesCollector
from pkg.gpuhandler.preparation.setup import PluginRunnable, PluginSettings, PreparationContainer
from pkg.gpuhandler.publishing import setup_publishing
from pkg.gpuhandler.reconciler import EnrichmentFailedError, EnrichmentReconciler
from pkg.gpuhandler.vfio_holds import VfioHolds
from pkg.hardware.labels import to_label_value

ENRICHMENT_CONTROLLER = "gpu-enrichment"
# A card whose reads fail is retried after 1 s, 2 s, 4 s, ... at most 5 minutes apart.
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class HandlerSettings:
    """``backend`` is an entry point name of group ``gpu_control_plane.vendors``; ``state_dir``
    is passed to it (the simulated backend keeps its health overrides and driver state there).
    ``plugin`` (None: no kubelet plugin) says where the kubelet plugin lives on the node."""

    node_name: str
    backend: str = "nvidia"
    sysfs_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    proc_root: Path = Path("/proc")
    state_dir: Path | None = None
    # Daemons of shares (MPS) started on the host, so they outlive this Pod (pkg.backends.host_daemons).
    daemons_on_host: bool = False
    enrich_period: float = 60.0
    workers: int = 2
    publish: bool = True  # publish ResourceSlices (pkg.gpuhandler.publishing)
    publish_resync_period: float = 300.0
    plugin: PluginSettings | None = None
    # A card recovers once no health event came for this long and its probe passes.
    health_quiet_period: float = 60.0
    health_poll: float = 1.0

    @property
    def node_label(self) -> str:
        """The node's value of ``gpu.deckhouse.io/node`` (node names may exceed 63 characters)."""
        return to_label_value(self.node_name)


def build_backend(vendors: VendorRegistry, settings: HandlerSettings) -> VendorBackend:
    """The backend named by ``settings.backend``; ``KeyError`` naming the installed ones."""
    options = BackendOptions(
        node_name=settings.node_name,
        sysfs_root=settings.sysfs_root,
        dev_root=settings.dev_root,
        proc_root=settings.proc_root,
        state_dir=settings.state_dir,
        daemons_on_host=settings.daemons_on_host,
    )
    return vendors.plugin(settings.backend).create(options)


def new_enrichment_reconciler(
    *,
    settings: HandlerSettings,
    gpus: SharedInformer[PhysicalGPU],
    handlers: list[Handler[EnrichmentState]],
    cards: CardSpecs,
    rand: Callable[[float, float], float],
) -> EnrichmentReconciler:
    return EnrichmentReconciler(
        node_label=settings.node_label,
        get_gpu=gpus.store.get_by_key,
        handlers=handlers,
        cards=cards,
        period=settings.enrich_period,
        rand=rand,
    )


class CardNudges:
    """Asks the enrichment to read a card again (by PCI address) through its channel source."""

    def __init__(self, *, gpus: SharedInformer[PhysicalGPU], channel: ChannelSource) -> None:
        self._gpus = gpus
        self.channel = channel

    def changed(self, card: str) -> None:
        for gpu in self._gpus.store.list():
            if (
                gpu.status is not None
                and gpu.status.pci_info is not None
                and gpu.status.pci_info.address == card
            ):
                self.channel.send(str(gpu.metadata.name))


def new_vfio_holds(settings: HandlerSettings) -> VfioHolds:
    """The cards passed through for claims; none without the kubelet plugin."""
    if settings.plugin is None:
        return VfioHolds()
    checkpoint = CheckpointFile(settings.plugin.checkpoint_path)
    return VfioHolds(load=lambda: checkpoint.load(boot_id=""))


def _request_for_name(name: object) -> list[Request]:
    return [Request(name=str(name))] if name else []


class GpuHandlerContainer(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=HandlerSettings)
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    vendors = providers.Singleton(default_registry)
    backend = providers.Singleton(build_backend, vendors=vendors, settings=settings)
    card_specs = providers.Singleton(CardSpecs)
    vfio_holds = providers.Singleton(new_vfio_holds, settings=settings)
    gpu_informer = providers.Singleton(
        node_physical_gpus, informers=informers, node_label=settings.provided.node_label
    )
    card_nudges = providers.Singleton(
        CardNudges, gpus=gpu_informer, channel=providers.Singleton(ChannelSource, name="prepared-cards")
    )
    health_tracker = providers.Singleton(HealthTracker, quiet_period=settings.provided.health_quiet_period)
    status_writer = providers.Singleton(KubeStatusWriter, client)
    now = providers.Object(now_utc)  # the HardwareHealthy condition's clock
    rand = providers.Object(random.uniform)  # the re-enrichment period's jitter
    handlers = providers.List(
        providers.Singleton(ReadinessHandler, backend=backend, holds=vfio_holds),
        providers.Singleton(HealthHandler, backend=backend, tracker=health_tracker, now=now),
        providers.Singleton(EnrichHandler, backend=backend),
        providers.Singleton(ApplyHandler, writer=status_writer),
        providers.Singleton(CardSpecHandler, backend=backend, cards=card_specs),
    )
    reconciler = providers.Singleton(
        new_enrichment_reconciler,
        settings=settings,
        gpus=gpu_informer,
        handlers=handlers,
        cards=card_specs,
        rand=rand,
    )


def setup_enrichment(manager: Manager, container: GpuHandlerContainer) -> Controller:
    """Registers the enrichment controller (one request per card) and its watch with ``manager``."""
    settings: HandlerSettings = container.settings()
    return (
        ControllerBuilder(manager, name=ENRICHMENT_CONTROLLER)
        .for_(container.gpu_informer(), predicates=[gpu_events()])
        .watches(container.card_nudges().channel, EnqueueRequestsFromMapFunc(_request_for_name))
        .workers(settings.workers)
        .without_leader_election()
        .backoff(base=RETRY_BASE_SECONDS, max_delay=RETRY_MAX_SECONDS)
        .expected_errors(ApiError, OSError, BackendError, EnrichmentFailedError)
        .complete(container.reconciler())
    )


def setup_handler(manager: Manager, container: GpuHandlerContainer) -> None:
    """Everything the gpu-handler runs: the enrichment, the ResourceSlice publisher and the kubelet
    plugin."""
    setup_enrichment(manager, container)
    setup_health(manager, container)
    setup_publishing(manager, container)
    setup_preparation(manager, container)


def setup_health(manager: Manager, container: GpuHandlerContainer) -> HealthMonitor:
    """The health monitor, and the enrichment and reporting following the tracker's verdicts
    (the publisher and the kubelet plugin subscribe in their own setup)."""
    settings: HandlerSettings = container.settings()
    tracker: HealthTracker = container.health_tracker()
    gpus = container.gpu_informer().store.list
    reporter = HealthReporter(recorder=container.recorder(), gpus=gpus)
    nudges: CardNudges = container.card_nudges()
    tracker.subscribe(lambda address, _old, _new: nudges.changed(address))  # HardwareHealthy now
    tracker.subscribe(reporter.changed)
    tracker.subscribe_events(reporter.seen)
    monitor = HealthMonitor(
        backend=container.backend(), tracker=tracker, gpus=gpus, poll=settings.health_poll
    )
    manager.add(monitor)
    return monitor


def setup_preparation(manager: Manager, container: GpuHandlerContainer) -> PreparationContainer | None:
    """The kubelet plugin (Prepare/Unprepare); ``None`` when turned off."""
    settings: HandlerSettings = container.settings()
    if settings.plugin is None:
        return None
    preparation = PreparationContainer(
        settings=settings.plugin,
        client=container.client(),
        informers=container.informers(),
        recorder=container.recorder(),
        backend=container.backend(),
        gpu_informer=container.gpu_informer(),
        card_changes=container.card_nudges(),
        holds=container.vfio_holds(),
        health_tracker=container.health_tracker(),
    )
    preparation.slice_informer()  # registered before the manager starts the informers
    manager.add(PluginRunnable(preparation))
    plugin: KubeletPlugin = preparation.plugin()
    manager.add_readyz_check("kubelet-plugin-registered", plugin.registration.check_registered)
    manager.metrics.register(
        PreparedDevicesCollector(load=preparation.store().load, node=settings.plugin.node_name)
    )
    return preparation
