"""Composition root of the gpu-handler's kubelet plugin: Prepare/Unprepare on this node.

:class:`PreparationContainer` declares, each in one place: the device kinds this node prepares
(``kinds``, in the order an offer is matched: the one list a new kind is registered in), the two
pipelines (``prepare_steps`` and ``unprepare_steps``, their order read top to bottom, run by the
framework's StepTaker), the one release order (:mod:`.release`), the services the steps use, the
driver the kubelet's calls reach and the :class:`~pkg.framework.kubeletplugin.server.KubeletPlugin`
that serves it. :class:`~.runnable.PluginRunnable` runs it in the manager.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dependency_injector import containers, providers

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import VendorBackend
from pkg.backends.driver_files import DriverFiles
from pkg.backends.nvidia.imex_host import ImexChannelNodes
from pkg.backends.preparation import CardPreparer
from pkg.domain.informers import node_resource_slices, node_slices_selector
from pkg.domain.metrics import METRICS
from pkg.domain.names import DRIVER
from pkg.dra.model.slices import pool_name
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.kubeletplugin.types import HealthBoard, PluginIdentity
from pkg.framework.steptaker import Pipeline, Step
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.cdi import CdiSpecs, DriverSpec
from pkg.gpuhandler.preparation.checkpoint import CheckpointFeed, CheckpointStore, read_boot_id
from pkg.gpuhandler.preparation.crash import crash_hook
from pkg.gpuhandler.preparation.driver import GpuDriver
from pkg.gpuhandler.preparation.driver_files_status import KubeDriverFilesStatus
from pkg.gpuhandler.preparation.health_feed import HealthFeed
from pkg.gpuhandler.preparation.kinds import DeviceKind, Kinds, record_types
from pkg.gpuhandler.preparation.kinds.imex_channel import ImexChannelKind
from pkg.gpuhandler.preparation.kinds.mig import MigKind
from pkg.gpuhandler.preparation.kinds.partition import PartitionKind
from pkg.gpuhandler.preparation.kinds.share import ShareKind
from pkg.gpuhandler.preparation.kinds.share.card_sharing import CardSharing, MpsWatchdog
from pkg.gpuhandler.preparation.kinds.vm.files import VmFiles
from pkg.gpuhandler.preparation.kinds.vm.holds import VfioHolds
from pkg.gpuhandler.preparation.kinds.vm.vfio import HostFiles, VfioKind
from pkg.gpuhandler.preparation.kinds.vm.vgpu import VgpuKind
from pkg.gpuhandler.preparation.kinds.whole_card import WholeCardKind
from pkg.gpuhandler.preparation.plan import ClaimPlanner
from pkg.gpuhandler.preparation.prepare_steps import (
    DriverFiles as DriverFilesStep,
)
from pkg.gpuhandler.preparation.prepare_steps import (
    LoadCheckpoint,
    PlanDevices,
    PrepareDevices,
    RecordCompleted,
    RecordedAnswer,
    RecordStarted,
    RefuseDoubleAllocation,
    WriteCdiSpec,
)
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.services import (
    CardChanges,
    DeviceStatusReports,
    KubeClaimReader,
    KubeComputeDomainReader,
    KubePodReader,
    NoStatusReports,
    RecorderClaimEvents,
    SliceOfferIndex,
)
from pkg.gpuhandler.preparation.startup import RecordRelease
from pkg.gpuhandler.preparation.supplied_files import SuppliedFiles
from pkg.gpuhandler.preparation.unprepare_steps import ForgetClaim, NothingToUnprepare, ReleaseClaim
from pkg.hardware.mdev import MdevHost
from pkg.hardware.pci_binding import PciDriverBinding

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PluginSettings:
    """Where the plugin lives on the node. ``instance`` names this copy's sockets (the Pod UID)."""

    node_name: str
    kubelet_root: Path
    instance: str
    cdi_dir: Path
    mps_root: Path = Path("/run") / DRIVER / "mps"
    lock_timeout: float = 30.0
    health_period: float = 10.0
    sysfs_root: Path = Path("/sys")  # VFIO: driver binding, IOMMU groups, DMI; vGPU: mdevs
    dev_root: Path = Path("/dev")  # VFIO: /dev/vfio/<group>
    # VFIO: the CPU flags (bare metal); IMEX: the channel major; the checkpoint: this boot's ID
    proc_root: Path = Path("/proc")

    @property
    def data_dir(self) -> Path:
        """Shared by every instance on the node: the checkpoint and the node lock."""
        return self.kubelet_root / "plugins" / DRIVER

    @property
    def checkpoint_path(self) -> Path:
        return self.data_dir / "checkpoint.json"

    @property
    def boot_id_path(self) -> Path:
        """Read from the host's /proc like the driver's files, so a simulated host's reboot (a new
        boot ID in its proc folder) reaches the checkpoint as a real one does."""
        return self.proc_root / "sys" / "kernel" / "random" / "boot_id"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "node.lock"

    @property
    def supplied_dir(self) -> Path:
        """The loaders' files a driver root lacks, written for the base spec to mount
        (:mod:`.supplied_files`): under the plugins folder, which the chart mounts at its host path."""
        return self.data_dir / "supplied"

    @property
    def vm_dir(self) -> Path:
        """VFIO claims' device metadata and QEMU hook input, one folder per claim UID."""
        return self.data_dir / "vm"

    @property
    def pool(self) -> str:
        return pool_name(self.node_name)


def new_pipeline(
    name: str, steps: Sequence[Step[ClaimAttempt]], environ: Mapping[str, str] = os.environ
) -> Pipeline[ClaimAttempt]:
    """A pipeline of the kubelet plugin, with the crash hook ``GPU_HANDLER_CRASH_AT`` names, if any."""
    hook = crash_hook(name, [step.name for step in steps], environ)
    return Pipeline(name, steps, hook=hook, metrics=METRICS)


def new_binding(backend: VendorBackend, settings: PluginSettings) -> PciDriverBinding:
    """Driver binding through the host's sysfs; a simulated backend brings the kernel's part."""
    kernel = getattr(backend, "sysfs_kernel", None)
    return PciDriverBinding(settings.sysfs_root, kernel=kernel)


def new_mdevs(backend: VendorBackend, settings: PluginSettings) -> MdevHost:
    """vGPUs through the host's sysfs; a simulated backend brings the kernel's part."""
    return MdevHost(settings.sysfs_root, kernel=getattr(backend, "sysfs_kernel", None))


def _preparer_of(backend: VendorBackend) -> CardPreparer:
    return backend.preparer


def _vendor_of(backend: VendorBackend) -> str:
    return backend.identity.name


def _driver_files_of(backend: VendorBackend) -> Callable[[frozenset[str] | None], DriverFiles]:
    return backend.driver_files


def _boot_id_reader(settings: PluginSettings) -> Callable[[], str]:
    return functools.partial(read_boot_id, settings.boot_id_path)


def _identity(settings: PluginSettings) -> PluginIdentity:
    return PluginIdentity(driver=DRIVER, instance=settings.instance)


def _gpus_of(gpus: SharedInformer[PhysicalGPU]) -> Callable[[], list[PhysicalGPU]]:
    return gpus.store.list


def _kinds_of(kinds: Sequence[DeviceKind]) -> Kinds:
    return Kinds(kinds)


class PreparationContainer(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=PluginSettings)
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)
    backend: providers.Dependency[VendorBackend] = providers.Dependency()
    gpu_informer = providers.Dependency(instance_of=SharedInformer)  # this node's PhysicalGPUs
    card_changes: providers.Dependency[CardChanges] = providers.Dependency()
    # The cards passed through for claims, and the checkpoint's listeners: the gpu-handler's, shared
    # with the enrichment and the publisher; a private one each when not given.
    holds = providers.Dependency(instance_of=VfioHolds, default=providers.Singleton(VfioHolds))
    feed = providers.Dependency(instance_of=CheckpointFeed, default=providers.Singleton(CheckpointFeed))
    # The node's health verdicts (gpu-handler's); a private, never-unhealthy one when not given.
    health_tracker = providers.Dependency(
        instance_of=HealthTracker, default=providers.Singleton(HealthTracker, quiet_period=0.0)
    )
    # Where the outcome of each call goes for the claims' status.devices (gpu-handler's status
    # book); nowhere when not given.
    status: providers.Dependency[DeviceStatusReports] = providers.Dependency(
        default=providers.Singleton(NoStatusReports)
    )

    preparer = providers.Singleton(_preparer_of, backend=backend)
    vendor = providers.Singleton(_vendor_of, backend=backend)
    claims = providers.Singleton(KubeClaimReader, client=client)
    pods = providers.Singleton(KubePodReader, client=client)
    domains = providers.Singleton(KubeComputeDomainReader, client=client)
    channel_nodes = providers.Singleton(
        ImexChannelNodes, dev_root=settings.provided.dev_root, proc_root=settings.provided.proc_root
    )
    host_kind = providers.Singleton(
        HostFiles, sysfs_root=settings.provided.sysfs_root, proc_root=settings.provided.proc_root
    )
    binding = providers.Singleton(new_binding, backend=backend, settings=settings)
    mdevs = providers.Singleton(new_mdevs, backend=backend, settings=settings)
    vm_files = providers.Singleton(VmFiles, folder=settings.provided.vm_dir)
    slice_informer = providers.Singleton(
        node_resource_slices, informers=informers, node_name=settings.provided.node_name
    )
    slice_selector = providers.Singleton(node_slices_selector, node_name=settings.provided.node_name)
    offers = providers.Singleton(
        SliceOfferIndex, slices=slice_informer, client=client, selector=slice_selector
    )
    cdi = providers.Singleton(CdiSpecs, folder=settings.provided.cdi_dir)
    supplied = providers.Singleton(SuppliedFiles, folder=settings.provided.supplied_dir)
    sharing = providers.Singleton(CardSharing, preparer=preparer, mps_root=settings.provided.mps_root)
    watchdog = providers.Singleton(MpsWatchdog, sharing=sharing, preparer=preparer)

    # The device kinds, in the order an allocated offer is matched against them (the first whose
    # offers match plans it): the one list a new kind is registered in.
    device_kinds = providers.List(
        providers.Singleton(
            VfioKind,
            preparer=preparer,
            binding=binding,
            host=host_kind,
            sysfs_root=settings.provided.sysfs_root,
            holds=holds,
            files=vm_files,
            offers=offers,
            dev_root=settings.provided.dev_root,
        ),
        providers.Singleton(
            VgpuKind, mdevs=mdevs, files=vm_files, offers=offers, dev_root=settings.provided.dev_root
        ),
        providers.Singleton(MigKind, preparer),
        providers.Singleton(PartitionKind, preparer),
        providers.Singleton(ShareKind, preparer=preparer, sharing=sharing, watchdog=watchdog),
        providers.Singleton(
            ImexChannelKind, nodes=channel_nodes, domains=domains, node_name=settings.provided.node_name
        ),
        providers.Singleton(WholeCardKind, preparer),
    )
    kinds = providers.Singleton(_kinds_of, device_kinds)
    boot_id = providers.Callable(_boot_id_reader, settings=settings)
    store = providers.Singleton(
        CheckpointStore,
        path=settings.provided.checkpoint_path,
        boot_id=boot_id,
        records=kinds.provided.records,
    )
    events = providers.Singleton(
        RecorderClaimEvents, recorder=recorder, gpus=providers.Factory(_gpus_of, gpus=gpu_informer)
    )
    board = providers.Singleton(HealthBoard)
    health = providers.Singleton(
        HealthFeed,
        board=board,
        store=store,
        gpus=providers.Factory(_gpus_of, gpus=gpu_informer),
        verdicts=health_tracker.provided.verdicts,
    )
    release = providers.Singleton(ClaimRelease, kinds=kinds, preparer=preparer, cdi=cdi)
    driver_files_status = providers.Singleton(
        KubeDriverFilesStatus,
        client=client,
        gpus=providers.Factory(_gpus_of, gpus=gpu_informer),
        recorder=recorder,
    )
    driver_spec = providers.Singleton(
        DriverSpec,
        files=providers.Factory(_driver_files_of, backend=backend),
        cdi=cdi,
        supplied=supplied,
        vendor=vendor,
        status=driver_files_status,
    )
    planner = providers.Singleton(
        ClaimPlanner, pool=settings.provided.pool, offers=offers, pods=pods, kinds=kinds
    )

    # Prepare, in the order its steps run (prepare_steps.py says what each does and undoes).
    load_checkpoint = providers.Singleton(LoadCheckpoint, store)
    prepare_steps = providers.List(
        load_checkpoint,
        providers.Singleton(RecordedAnswer),
        providers.Singleton(PlanDevices, claims=claims, planner=planner),
        providers.Singleton(RefuseDoubleAllocation, kinds),
        providers.Singleton(DriverFilesStep, driver=driver_spec, kinds=kinds),
        providers.Singleton(RecordStarted, store=store, listener=feed.provided.publish),
        providers.Singleton(PrepareDevices, kinds=kinds, release=release, store=store),
        providers.Singleton(WriteCdiSpec, cdi),
        providers.Singleton(RecordCompleted, store=store),
    )
    # Unprepare, in the order its steps run (unprepare_steps.py).
    unprepare_steps = providers.List(
        load_checkpoint,
        providers.Singleton(NothingToUnprepare, cdi),
        providers.Singleton(ReleaseClaim, release),
        providers.Singleton(ForgetClaim, store),
    )
    prepare = providers.Singleton(new_pipeline, "prepare", prepare_steps)
    unprepare = providers.Singleton(new_pipeline, "unprepare", unprepare_steps)
    # Start-up releases a record a crash left behind through Prepare's undos.
    record_release = providers.Singleton(RecordRelease, prepare)

    driver = providers.Singleton(
        GpuDriver,
        prepare=prepare,
        unprepare=unprepare,
        listener=feed.provided.publish,
        lock_path=settings.provided.lock_path,
        lock_timeout=settings.provided.lock_timeout,
        events=events,
        cards=card_changes,
        vendor=vendor,
        after_change=health.provided.stale.set,
        status=status,
    )
    identity = providers.Singleton(_identity, settings=settings)
    plugin = providers.Singleton(
        KubeletPlugin,
        identity=identity,
        kubelet_root=settings.provided.kubelet_root,
        driver=driver,
        health=board,
    )


def _names(steps: Any) -> tuple[str, ...]:
    return tuple(str(provider.cls.name) for provider in steps.args)


# The crash points, by pipeline: the steps' names in the order declared above.
PREPARE_POINTS: Final = _names(PreparationContainer.prepare_steps)
UNPREPARE_POINTS: Final = _names(PreparationContainer.unprepare_steps)
# Every kind class registered above, in order: their records are what this release's checkpoint holds.
KIND_CLASSES: Final[tuple[type[DeviceKind], ...]] = tuple(
    provider.cls for provider in PreparationContainer.device_kinds.args
)
# What a checkpoint of this release may hold besides whole cards: the kinds' records, by field.
RECORD_TYPES: Final = record_types(KIND_CLASSES)
