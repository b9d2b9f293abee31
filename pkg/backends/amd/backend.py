"""The AMD backend: :class:`~pkg.backends.backend.VendorBackend` over the ``amdgpu`` sysfs files.

Filling rules (docs/architecture.md#a-field-without-a-source-is-left-out): the product name and
architecture come from the model table (:mod:`.models`) by PCI device ID, the memory from
``mem_info_vram_total`` (the table's figure only when the driver has no such file); partition
modes are offered only where the driver lists them *and* the table knows the model's dies (a
partition's size), restricted to the modes the card's current memory partition mode allows —
switching memory modes needs a driver reload, which Prepare never does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from api.gpu.v1alpha1 import (
    LABEL_DEVICE,
    AmdCapabilities,
    AmdState,
    Capabilities,
    DriverType,
    PhysicalGPU,
    Vendor,
)
from pkg.backends.amd.driver import AmdDriver
from pkg.backends.amd.health import RasHealthEvents, check_health
from pkg.backends.amd.identity import IDENTITY
from pkg.backends.amd.models import AmdModel, model_of
from pkg.backends.amd.preparer import AmdPreparer
from pkg.backends.amd.sysfs import CardFiles, read_card
from pkg.backends.amd.usage import read_usage
from pkg.backends.backend import BackendError, CardVerdict, Enrichment, claimed_gpus, pci_address
from pkg.backends.driver_files import REASON_DRIVER_UNREADABLE, DriverFiles, DriverFilesError
from pkg.backends.identity import VendorIdentity
from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.backends.usage import CardUsage
from pkg.dra.model.card import Card, PartitionMode
from pkg.hardware.labels import normalize_device_model
from pkg.hardware.pci import PciDevice

MIB = 2**20
KFD_VERSION = "kfd"  # the base spec's version: it holds only /dev/kfd, whatever the driver's version


class AmdBackend:
    """Reads AMD cards from ``sysfs_root``; switches modes through ``driver``."""

    def __init__(self, *, sysfs_root: Path, dev_root: Path, driver: AmdDriver) -> None:
        self._sysfs_root = sysfs_root
        self._dev_root = dev_root
        self._preparer = AmdPreparer(sysfs_root=sysfs_root, dev_root=dev_root, driver=driver)

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY

    @property
    def driver_type(self) -> DriverType:
        return DriverType.ROCM

    @property
    def preparer(self) -> AmdPreparer:
        return self._preparer

    def discover(self, devices: Sequence[PciDevice]) -> list[PciDevice]:
        return claimed_gpus(IDENTITY, devices)

    def read(self, gpu: PhysicalGPU) -> tuple[CardFiles, AmdModel]:
        files = read_card(self._sysfs_root, pci_address(gpu))
        model = model_of(files.device_id)
        if model is None:
            raise BackendError(
                address=files.address,
                reason="UnknownModel",
                message=f"PCI device {files.device_id} is not an AMD Instinct model this backend knows",
            )
        return files, model

    def enrich(self, gpu: PhysicalGPU) -> Enrichment:
        """The card's model and memory, the partition modes it lists and the ones it is in: what
        the offers are built from, so a reader sees why a card offers (or no longer offers) a mode."""
        files, model = self.read(gpu)
        return Enrichment(
            capabilities=Capabilities(
                product_name=model.name,
                memory_mib=_memory_mib(files, model),
                vendor=Vendor.AMD,
                amd=_capabilities(files),
            ),
            amd=_state(files),
        )

    def health(self, gpu: PhysicalGPU) -> CardVerdict:
        return check_health(self._sysfs_root, pci_address(gpu))

    def health_events(self, addresses: Sequence[str]) -> RasHealthEvents:
        return RasHealthEvents(self._sysfs_root, addresses)

    def offer_inputs(self, gpu: PhysicalGPU) -> Card:
        files, model = self.read(gpu)
        memory = _memory_mib(files, model)
        label = (gpu.metadata.labels or {}).get(LABEL_DEVICE)
        return Card(
            physical_gpu=str(gpu.metadata.name),
            pci_address=files.address,
            product_name=model.name,
            device=label or normalize_device_model(model.name),
            memory_mib=memory,
            vendor=IDENTITY.name,
            architecture=model.architecture,
            driver_version=files.driver_version,
            uuid=files.unique_id,
            partition_modes=partition_modes(files, model, memory),
            sharing=(),
        )

    def driver_files(self, capabilities: frozenset[str] | None = None) -> DriverFiles:
        """``/dev/kfd``, the compute interface every container of an AMD device opens (the
        node's base CDI spec), whatever ``capabilities`` (NVIDIA's driver capabilities) are asked;
        no libraries: ROCm's user space comes with the workload's image."""
        kfd = self._dev_root / "kfd"
        if not kfd.exists():
            raise DriverFilesError(reason=REASON_DRIVER_UNREADABLE, message=f"{kfd} does not exist")
        return DriverFiles(
            version=KFD_VERSION,
            edits=ContainerEdits(device_nodes=(DeviceNode(path="/dev/kfd", host_path=str(kfd)),)),
        )

    def usage(self, address: str) -> CardUsage:
        """The processes holding VRAM on the card, from the KFD's per-process files (:mod:`.usage`)."""
        return read_usage(self._sysfs_root, address, read_card(self._sysfs_root, address).unique_id)

    def close(self) -> None:
        """Nothing to release: no library is loaded."""


def partition_modes(files: CardFiles, model: AmdModel, memory_mib: int) -> tuple[PartitionMode, ...]:
    """The modes to offer: listed by the driver, known to the table, allowed by the memory mode."""
    allowed = model.modes_for(files.memory_mode)
    return tuple(
        PartitionMode(name=name, count=count, slots=model.xcds // count, memory_mib=memory_mib // count)
        for name, count in sorted(allowed.items(), key=lambda item: item[1])
        if name in files.compute_modes and model.xcds % count == 0
    )


def _memory_mib(files: CardFiles, model: AmdModel) -> int:
    return files.vram_bytes // MIB if files.vram_bytes else model.memory_mib


def _capabilities(files: CardFiles) -> AmdCapabilities | None:
    """The modes the card lists; ``None`` (left out) for a card without partitioning."""
    if not files.compute_modes and not files.memory_modes:
        return None
    return AmdCapabilities(
        compute_partition_modes=list(files.compute_modes) or None,
        memory_partition_modes=list(files.memory_modes) or None,
    )


def _state(files: CardFiles) -> AmdState | None:
    """The modes the card is in; ``None`` (left out) for a card without partitioning."""
    if files.compute_mode is None and files.memory_mode is None:
        return None
    return AmdState(compute_partition_mode=files.compute_mode, memory_partition_mode=files.memory_mode)
