"""Composition root of the gpu-handler's kubelet plugin: Prepare/Unprepare on this node.

:class:`PreparationContainer` builds the straight Prepare and Unprepare (:mod:`.prepare`,
:mod:`.unprepare`), the device kinds they prepare and release through (:func:`new_kinds`, the one
list a new kind is registered in), the one release order (:mod:`.release`), the services they
use, the driver the kubelet's calls reach and the
:class:`~pkg.framework.kubeletplugin.server.KubeletPlugin` that serves it.
:class:`~.runnable.PluginRunnable` runs it in the manager.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dependency_injector import containers, providers

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import VendorBackend
from pkg.backends.driver_files import DriverFiles
from pkg.backends.preparation import CardPreparer
from pkg.domain.informers import node_resource_slices, node_slices_selector
from pkg.domain.names import DRIVER
from pkg.dra.model.slices import pool_name
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.kubeletplugin.types import HealthBoard, PluginIdentity
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointStore, read_boot_id
from pkg.gpuhandler.preparation.driver import GpuDriver
from pkg.gpuhandler.preparation.driver_spec import DriverSpec, KubeDriverFilesStatus
from pkg.gpuhandler.preparation.health_feed import HealthFeed
from pkg.gpuhandler.preparation.kinds import Kinds
from pkg.gpuhandler.preparation.kinds.mig import MigKind
from pkg.gpuhandler.preparation.kinds.partition import PartitionKind
from pkg.gpuhandler.preparation.kinds.share import ShareKind
from pkg.gpuhandler.preparation.kinds.vfio import VfioKind
from pkg.gpuhandler.preparation.kinds.vgpu import VgpuKind
from pkg.gpuhandler.preparation.kinds.whole_card import WholeCardKind
from pkg.gpuhandler.preparation.prepare import ClaimPreparer
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.services import (
    CardChanges,
    KubeClaimReader,
    KubePodReader,
    OfferIndex,
    RecorderClaimEvents,
    SliceOfferIndex,
)
from pkg.gpuhandler.preparation.sharing import CardSharing, MpsWatchdog
from pkg.gpuhandler.preparation.unprepare import ClaimUnpreparer
from pkg.gpuhandler.preparation.vfio_holds import VfioHolds
from pkg.gpuhandler.preparation.vfio_plan import HostFiles
from pkg.gpuhandler.preparation.vm_metadata import VmFiles
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
    proc_root: Path = Path("/proc")  # VFIO: the CPU flags (bare metal)

    @property
    def data_dir(self) -> Path:
        """Shared by every instance on the node: the checkpoint and the node lock."""
        return self.kubelet_root / "plugins" / DRIVER

    @property
    def checkpoint_path(self) -> Path:
        return self.data_dir / "checkpoint.json"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "node.lock"

    @property
    def vm_dir(self) -> Path:
        """VFIO claims' device metadata and QEMU hook input, one folder per claim UID."""
        return self.data_dir / "vm"

    @property
    def pool(self) -> str:
        return pool_name(self.node_name)


def new_kinds(
    *,
    preparer: CardPreparer,
    sharing: CardSharing,
    binding: PciDriverBinding,
    mdevs: MdevHost,
    vm_files: VmFiles,
    offers: OfferIndex,
    dev_root: Path,
) -> Kinds:
    """The device kinds this node prepares; a new kind is registered here."""
    return Kinds(
        [
            VfioKind(preparer=preparer, binding=binding, files=vm_files, offers=offers, dev_root=dev_root),
            VgpuKind(mdevs=mdevs, files=vm_files, offers=offers, dev_root=dev_root),
            MigKind(preparer),
            PartitionKind(preparer),
            ShareKind(preparer=preparer, sharing=sharing),
            WholeCardKind(preparer),
        ]
    )


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


def _driver_files_of(backend: VendorBackend) -> Callable[[], DriverFiles]:
    return backend.driver_files


def _identity(settings: PluginSettings) -> PluginIdentity:
    return PluginIdentity(driver=DRIVER, instance=settings.instance)


def _gpus_of(gpus: SharedInformer[PhysicalGPU]) -> Callable[[], list[PhysicalGPU]]:
    return gpus.store.list


class PreparationContainer(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=PluginSettings)
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)
    backend: providers.Dependency[VendorBackend] = providers.Dependency()
    gpu_informer = providers.Dependency(instance_of=SharedInformer)  # this node's PhysicalGPUs
    card_changes: providers.Dependency[CardChanges] = providers.Dependency()
    holds = providers.Dependency(instance_of=VfioHolds, default=VfioHolds())
    # The node's health verdicts (gpu-handler's); a private, never-unhealthy one when not given.
    health_tracker = providers.Dependency(
        instance_of=HealthTracker, default=providers.Singleton(HealthTracker, quiet_period=0.0)
    )

    preparer = providers.Singleton(_preparer_of, backend=backend)
    vendor = providers.Singleton(_vendor_of, backend=backend)
    boot_id = providers.Object(read_boot_id)
    store = providers.Singleton(CheckpointStore, path=settings.provided.checkpoint_path, boot_id=boot_id)
    claims = providers.Singleton(KubeClaimReader, client=client)
    pods = providers.Singleton(KubePodReader, client=client)
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
    sharing = providers.Singleton(CardSharing, preparer=preparer, mps_root=settings.provided.mps_root)
    watchdog = providers.Singleton(MpsWatchdog, sharing=sharing, preparer=preparer)
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
    kinds = providers.Singleton(
        new_kinds,
        preparer=preparer,
        sharing=sharing,
        binding=binding,
        mdevs=mdevs,
        vm_files=vm_files,
        offers=offers,
        dev_root=settings.provided.dev_root,
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
        vendor=vendor,
        status=driver_files_status,
    )
    claim_preparer = providers.Singleton(
        ClaimPreparer,
        store=store,
        claims=claims,
        offers=offers,
        pods=pods,
        host=host_kind,
        sysfs_root=settings.provided.sysfs_root,
        pool=settings.provided.pool,
        kinds=kinds,
        release=release,
        cdi=cdi,
        holds=holds,
        driver=driver_spec,
    )
    claim_unpreparer = providers.Singleton(ClaimUnpreparer, store=store, release=release, cdi=cdi)
    driver = providers.Singleton(
        GpuDriver,
        preparer=claim_preparer,
        unpreparer=claim_unpreparer,
        holds=holds,
        lock_path=settings.provided.lock_path,
        lock_timeout=settings.provided.lock_timeout,
        events=events,
        cards=card_changes,
        vendor=vendor,
        after_change=health.provided.refresh,
    )
    identity = providers.Singleton(_identity, settings=settings)
    plugin = providers.Singleton(
        KubeletPlugin,
        identity=identity,
        kubelet_root=settings.provided.kubelet_root,
        driver=driver,
        health=board,
    )
