"""Composition root of the gpu-handler: its parts built from the handler's settings and wired.

:class:`GpuHandlerContainer` declares how the parts are built from :class:`HandlerSettings` and
the process runtime (client, informer factory, event recorder); :func:`setup_handler` registers
them with a manager:

* the enrichment (:mod:`pkg.gpuhandler.enrichment`): one informer of this node's PhysicalGPUs
  (label selector ``gpu.deckhouse.io/node=<node>``: a node component lists and watches only its
  own node's objects, so its load does not grow with the cluster), the enrichment's handler chain
  and a controller with one request per card, and the vendor backend chosen by entry point name;
* the health monitor and reporting (:mod:`pkg.gpuhandler.health`), whose verdict changes read the
  card again;
* the ResourceSlice publisher (:mod:`pkg.gpuhandler.publishing`), reading the cards through the
  enrichment's card specs;
* the kubelet plugin (:mod:`pkg.gpuhandler.preparation`), which tells the enrichment when a
  Prepare changed a card's mode (:class:`~pkg.gpuhandler.enrichment.card_changes.EnrichmentCardChanges`),
  and the claims' device status when a Prepare or Unprepare ended (the status book of
  :mod:`pkg.gpuhandler.attribution`, also fed by the health verdicts and the attribution's usage).

There is no leader election: one handler runs per node and writes only that node's objects.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dependency_injector import containers, providers

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import BackendOptions, VendorBackend, VendorRegistry, default_registry
from pkg.backends.driver_files import DEFAULT_DRIVER_ROOT, DriverRootOptions
from pkg.domain.informers import node_physical_gpus
from pkg.dra.model.slices import pool_name
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.source import ChannelSource
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler
from pkg.framework.reconcile.conditions import now_utc
from pkg.gpuhandler.attribution.setup import AttributionSettings, setup_attribution, setup_device_status
from pkg.gpuhandler.enrichment.card_changes import EnrichmentCardChanges
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.chain import enrichment_handlers
from pkg.gpuhandler.enrichment.compute_domains import NodeChannels
from pkg.gpuhandler.enrichment.readiness import readable_by
from pkg.gpuhandler.enrichment.reconciler import EnrichmentReconciler
from pkg.gpuhandler.enrichment.setup import setup_enrichment
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.health.monitor import HealthMonitor
from pkg.gpuhandler.health.reporting import HealthReporter
from pkg.gpuhandler.preparation import metrics as preparation_metrics
from pkg.gpuhandler.preparation.cdi_hook import install_cdi_hook
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, CheckpointFeed
from pkg.gpuhandler.preparation.kinds.vm.holds import VfioHolds
from pkg.gpuhandler.preparation.prepared_devices import PreparedDevicesCollector
from pkg.gpuhandler.preparation.runnable import PluginRunnable
from pkg.gpuhandler.preparation.setup import PluginSettings, PreparationContainer
from pkg.gpuhandler.publishing import PublishingContainer, PublishSettings, setup_publishing
from pkg.hardware.labels import to_label_value
from pkg.hardware.pci_topology import SysfsPciTopology

logger = logging.getLogger(__name__)


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
    # The driver's user space for containers; the hook program is installed from cdi_hook_source.
    driver_root: DriverRootOptions = DEFAULT_DRIVER_ROOT
    cdi_hook_source: Path | None = None
    # Per-Pod attribution of the cards' processes (pkg.gpuhandler.attribution); needs the plugin.
    attribution: AttributionSettings = dataclasses.field(default_factory=AttributionSettings)
    # IMEX channels offered to compute domains (pkg.gpuhandler.publishing.channels); 0: none.
    imex_channels: int = 128

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
        driver_root=dataclasses.replace(settings.driver_root, cdi_hook=installed_cdi_hook(settings)),
        processes_proc=settings.attribution.processes_proc,
    )
    return vendors.plugin(settings.backend).create(options)


def installed_cdi_hook(settings: HandlerSettings) -> Path | None:
    """The hook program put on the host for the base CDI spec (:mod:`~pkg.gpuhandler.preparation.cdi_hook`);
    None without the kubelet plugin, without a program to install, or when it could not be
    installed (then every Prepare fails with ``CdiHookMissing`` and the PhysicalGPUs say so)."""
    if settings.plugin is None or settings.cdi_hook_source is None:
        return None
    try:
        return install_cdi_hook(settings.cdi_hook_source, settings.plugin.data_dir / "bin")
    except OSError as exc:
        preparation_metrics.startup_failures.labels(step="install-cdi-hook").inc()
        logger.error("could not install the CDI hook program from %s: %s", settings.cdi_hook_source, exc)
        return None


def new_enrichment_reconciler(
    *,
    settings: HandlerSettings,
    gpus: SharedInformer[PhysicalGPU],
    handlers: list[Handler[EnrichmentState]],
    card_specs: CardSpecs,
    rand: Callable[[float, float], float],
) -> EnrichmentReconciler:
    return EnrichmentReconciler(
        node_label=settings.node_label,
        get_gpu=gpus.store.get_by_key,
        handlers=handlers,
        card_specs=card_specs,
        period=settings.enrich_period,
        rand=rand,
    )


def new_vfio_holds() -> VfioHolds:
    """The cards passed through for claims: empty until the kubelet plugin's checkpoint store first
    loads (start-up reconciliation, before it serves), and empty for good without the plugin."""
    return VfioHolds()


class GpuHandlerContainer(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=HandlerSettings)
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    vendors = providers.Singleton(default_registry)
    backend = providers.Singleton(build_backend, vendors=vendors, settings=settings)
    card_specs = providers.Singleton(CardSpecs)
    # The publish pass's IMEX channel decision, which the enrichment reports as ComputeDomainsReady.
    node_channels = providers.Singleton(NodeChannels)
    vfio_holds = providers.Singleton(new_vfio_holds)
    # The checkpoint as the kubelet plugin leaves it, for the publisher's devices in use.
    checkpoint_feed = providers.Singleton(CheckpointFeed)
    gpu_informer = providers.Singleton(
        node_physical_gpus, informers=informers, node_label=settings.provided.node_label
    )
    card_changes = providers.Singleton(
        EnrichmentCardChanges,
        gpus=gpu_informer,
        channel=providers.Singleton(ChannelSource, name="card-changes"),
    )
    health_tracker = providers.Singleton(HealthTracker, quiet_period=settings.provided.health_quiet_period)
    status_writer = providers.Singleton(KubeStatusWriter, client)
    now = providers.Object(now_utc)  # the HardwareHealthy condition's clock
    rand = providers.Object(random.uniform)  # the re-enrichment period's jitter
    pci_topology = providers.Singleton(SysfsPciTopology, settings.provided.sysfs_root)
    handlers = providers.Singleton(
        enrichment_handlers,
        backend=backend,
        tracker=health_tracker,
        writer=status_writer,
        card_specs=card_specs,
        topology=pci_topology,
        holds=vfio_holds,
        channels=node_channels,
        now=now,
    )
    reconciler = providers.Singleton(
        new_enrichment_reconciler,
        settings=settings,
        gpus=gpu_informer,
        handlers=handlers,
        card_specs=card_specs,
        rand=rand,
    )


def setup_handler(manager: Manager, container: GpuHandlerContainer) -> None:
    """Everything the gpu-handler runs: the enrichment, the health monitor, the ResourceSlice
    publisher and the kubelet plugin."""
    settings: HandlerSettings = container.settings()
    container.node_channels().subscribe(container.card_changes().all_changed)  # ComputeDomainsReady
    setup_enrichment(
        manager,
        gpus=container.gpu_informer(),
        card_changes=container.card_changes(),
        reconciler=container.reconciler(),
        workers=settings.workers,
    )
    setup_health(manager, container)
    setup_handler_publishing(manager, container)
    setup_preparation(manager, container)


def setup_health(manager: Manager, container: GpuHandlerContainer) -> HealthMonitor:
    """The health monitor, and the enrichment and reporting following the tracker's verdicts
    (the publisher and the kubelet plugin subscribe in their own setup)."""
    settings: HandlerSettings = container.settings()
    tracker: HealthTracker = container.health_tracker()
    backend: VendorBackend = container.backend()
    gpus = container.gpu_informer().store.list
    reporter = HealthReporter(recorder=container.recorder(), gpus=gpus)
    changes: EnrichmentCardChanges = container.card_changes()
    tracker.subscribe(lambda address, _old, _new: changes.changed(address))  # HardwareHealthy now
    tracker.subscribe(reporter.changed)
    tracker.subscribe_events(reporter.seen)
    monitor = HealthMonitor(
        backend=backend,
        tracker=tracker,
        gpus=gpus,
        readable=readable_by(pci_vendor_id=backend.identity.pci_vendor_id, driver_type=backend.driver_type),
        poll=settings.health_poll,
    )
    manager.add(monitor)
    return monitor


def setup_handler_publishing(manager: Manager, container: GpuHandlerContainer) -> Controller | None:
    """The ResourceSlice publisher over the enrichment's card specs; ``None`` when turned off."""
    settings: HandlerSettings = container.settings()
    if not settings.publish:
        logger.info("ResourceSlice publishing is turned off", extra={"node": settings.node_name})
        return None
    publishing = PublishingContainer(
        settings=PublishSettings(
            node_name=settings.node_name,
            node_label=settings.node_label,
            resync_period=settings.publish_resync_period,
            lock_path=settings.plugin.lock_path if settings.plugin else None,
            lock_timeout=settings.plugin.lock_timeout if settings.plugin else 30.0,
            imex_channels=settings.imex_channels,
            proc_root=settings.proc_root,
            processes_proc=settings.attribution.processes_proc,
            host_root=settings.driver_root.root,
        ),
        client=container.client(),
        informers=container.informers(),
        card_specs=container.card_specs(),
        gpu_informer=container.gpu_informer(),
        backend=container.backend(),
        health_tracker=container.health_tracker(),
        node_channels=container.node_channels(),
    )
    publishing.holds.override(providers.Object(container.vfio_holds()))
    # The fill-following order: the devices the checkpoint records, as Prepare and Unprepare leave it.
    in_use = publishing.in_use()
    pool = pool_name(settings.node_name)
    container.checkpoint_feed().subscribe(lambda checkpoint: in_use.update(checkpoint.devices_in_use(pool)))
    return setup_publishing(manager, publishing)


def setup_preparation(manager: Manager, container: GpuHandlerContainer) -> PreparationContainer | None:
    """The kubelet plugin (Prepare/Unprepare); ``None`` when turned off."""
    settings: HandlerSettings = container.settings()
    if settings.plugin is None:
        return None

    def checkpoint() -> CheckpointData:  # the store is built below, with the plugin
        return preparation.store().load()

    book, reports = setup_device_status(
        manager,
        client=container.client(),
        pool=settings.plugin.pool,
        tracker=container.health_tracker(),
        gpus=container.gpu_informer().store.list,
        checkpoint=checkpoint,
    )
    preparation = PreparationContainer(
        settings=settings.plugin,
        client=container.client(),
        informers=container.informers(),
        recorder=container.recorder(),
        backend=container.backend(),
        gpu_informer=container.gpu_informer(),
        card_changes=container.card_changes(),
        holds=container.vfio_holds(),
        feed=container.checkpoint_feed(),
        health_tracker=container.health_tracker(),
        status=reports,
    )
    preparation.slice_informer()  # registered before the manager starts the informers
    manager.add(PluginRunnable(preparation))
    plugin: KubeletPlugin = preparation.plugin()
    manager.add_readyz_check("kubelet-plugin-registered", plugin.registration.check_registered)
    manager.metrics.register(
        PreparedDevicesCollector(load=preparation.store().load, node=settings.plugin.node_name)
    )
    setup_attribution(
        manager,
        settings=settings.attribution,
        node_name=settings.node_name,
        backend=container.backend(),
        client=container.client(),
        informers=container.informers(),
        gpus=container.gpu_informer().store.list,
        checkpoint=preparation.store().load,
        book=book,
    )
    return preparation
