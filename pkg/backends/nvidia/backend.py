"""The NVIDIA backend: :class:`~pkg.backends.backend.VendorBackend` over an NVML adapter.

The backend is the same code whether the adapter is the real library
(:class:`~pkg.backends.nvidia.nvml.PynvmlAdapter`) or the simulation
(:class:`~pkg.backends.simulated.fake_nvml.SimulatedNvml`): it reads a card once per call
(:func:`~pkg.backends.nvidia.reading.read_card`) and turns the reading into the API's models.

Filling rules it owns (docs/architecture.md#a-field-without-a-source-is-left-out): ``capabilities.nvidia.mig``
only when MIG is supported and profiles are known (no ``totalSlices`` without profiles);
``currentState.nvidia.mig`` only when MIG is supported and its mode was read; every optional value only when
NVML returned it. *When* to call it (DriverReady=True, driverType Nvidia) is the caller's rule.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

from api.gpu.v1alpha1 import (
    LABEL_DEVICE,
    Capabilities,
    DriverType,
    MigPlacement,
    MigProfile,
    NvidiaCapabilities,
    NvidiaFabric,
    NvidiaMigCapabilities,
    NvidiaMigState,
    NvidiaState,
    PhysicalGPU,
    Vendor,
)
from pkg.backends.backend import CardVerdict, Enrichment, claimed_gpus, pci_address
from pkg.backends.driver_files import (
    DEFAULT_DRIVER_ROOT,
    REASON_DRIVER_UNREADABLE,
    DriverFiles,
    DriverFilesError,
    DriverRootOptions,
)
from pkg.backends.identity import VendorIdentity
from pkg.backends.nvidia import vgpu
from pkg.backends.nvidia.architecture import compute_types
from pkg.backends.nvidia.driver_root import discover_driver_files
from pkg.backends.nvidia.events import NvmlHealthEvents
from pkg.backends.nvidia.fabric import FabricFacts
from pkg.backends.nvidia.health import check_health
from pkg.backends.nvidia.identity import IDENTITY
from pkg.backends.nvidia.nvml_port import Nvml, NvmlError
from pkg.backends.nvidia.preparer import NvidiaPreparer
from pkg.backends.nvidia.profiles import ProfileFacts
from pkg.backends.nvidia.reading import CardReading, read_card
from pkg.backends.nvidia.sharing import MpsControl, TimeSlicer
from pkg.backends.nvidia.usage import UsageReader
from pkg.backends.usage import CardUsage
from pkg.dra.model.card import Card, Engines, MigProfileSpec, Placement
from pkg.hardware.labels import normalize_device_model
from pkg.hardware.pci import PciDevice


class NvidiaBackend:
    """Reads NVIDIA cards through ``nvml``; thread-safe as the adapter is."""

    def __init__(
        self,
        *,
        nvml: Nvml,
        identity: VendorIdentity = IDENTITY,
        dev_root: Path = Path("/dev"),
        proc_root: Path = Path("/proc"),
        time_slicer: TimeSlicer | None = None,
        mps: MpsControl | None = None,
        driver_root: DriverRootOptions = DEFAULT_DRIVER_ROOT,
        sysfs_root: Path | None = None,
    ) -> None:
        self._nvml = nvml
        self._sysfs_root = sysfs_root
        self._identity = identity
        self._dev_root = dev_root
        self._driver_root = driver_root
        self._driver_files: dict[frozenset[str], DriverFiles] = {}  # by capability set, of one version
        self._driver_files_version: str | None = None
        self._driver_files_lock = threading.Lock()
        self._usage = UsageReader(nvml)
        self._preparer = NvidiaPreparer(
            nvml=nvml, dev_root=dev_root, proc_root=proc_root, time_slicer=time_slicer, mps=mps
        )

    @property
    def preparer(self) -> NvidiaPreparer:
        return self._preparer

    @property
    def identity(self) -> VendorIdentity:
        return self._identity

    @property
    def driver_type(self) -> DriverType:
        return DriverType.NVIDIA

    def discover(self, devices: Sequence[PciDevice]) -> list[PciDevice]:
        return claimed_gpus(self._identity, devices)

    def enrich(self, gpu: PhysicalGPU) -> Enrichment:
        reading = self.read(gpu)
        return Enrichment(capabilities=capabilities_of(reading), nvidia=nvidia_state_of(reading))

    def health(self, gpu: PhysicalGPU) -> CardVerdict:
        return check_health(self._nvml, pci_address(gpu))

    def health_events(self, addresses: Sequence[str]) -> NvmlHealthEvents:
        return NvmlHealthEvents(self._nvml, addresses)

    def offer_inputs(self, gpu: PhysicalGPU) -> Card:
        card = card_of(gpu, self.read(gpu))
        if self._sysfs_root is None:
            return card
        return dataclasses.replace(card, vgpu_types=vgpu.vgpu_types_of(self._sysfs_root, card.pci_address))

    def driver_files(self, capabilities: frozenset[str] | None = None) -> DriverFiles:
        """The user space of the driver NVML reports now for ``capabilities`` (None: the
        configured ones); found again only when its version changes (a driver upgrade), so every
        Prepare can ask at the cost of one NVML call per set."""
        try:
            version = self._nvml.driver_version()
        except NvmlError as exc:
            raise DriverFilesError(reason=REASON_DRIVER_UNREADABLE, message=f"NVML: {exc}") from exc
        wanted = self._driver_root.capabilities if capabilities is None else capabilities
        with self._driver_files_lock:
            if self._driver_files_version != version:
                self._driver_files, self._driver_files_version = {}, version
            files = self._driver_files.get(wanted)
            if files is None:
                files = self._driver_files[wanted] = discover_driver_files(
                    dataclasses.replace(self._driver_root, capabilities=wanted),
                    version=version,
                    dev_root=self._dev_root,
                )
            return files

    def usage(self, address: str) -> CardUsage:
        return self._usage.read(address)

    def read(self, gpu: PhysicalGPU) -> CardReading:
        """One NVML pass over the card; raises :class:`~pkg.backends.backend.BackendError`."""
        info = gpu.status.pci_info if gpu.status else None
        return read_card(self._nvml, pci_address(gpu), pci_device_id=info.device.id if info else None)

    def close(self) -> None:
        self._nvml.close()


def capabilities_of(reading: CardReading) -> Capabilities:
    mig = reading.mig
    mig_block = None
    if mig.supported and mig.profiles:
        mig_block = NvidiaMigCapabilities(
            total_slices=mig.total_slices, profiles=[_api_profile(p) for p in mig.profiles]
        )
    return Capabilities(
        product_name=reading.product_name,
        memory_mib=reading.memory_mib,
        vendor=Vendor.NVIDIA,
        nvidia=NvidiaCapabilities(
            compute_cap=reading.compute_cap,
            product_architecture=reading.architecture,
            board_part_number=reading.board_part_number,
            compute_types=compute_types(reading.architecture),
            power_limit_min_w=reading.power_limit_min_w,
            power_limit_max_w=reading.power_limit_max_w,
            mig_supported=mig.supported,
            mig=mig_block,
        ),
    )


def nvidia_state_of(reading: CardReading) -> NvidiaState:
    mig = reading.mig
    return NvidiaState(
        gpu_uuid=reading.uuid,
        driver_version=reading.driver_version,
        cuda_version=reading.cuda_version,
        power_limit_current_w=reading.power_limit_current_w,
        power_limit_enforced_w=reading.power_limit_enforced_w,
        mig=NvidiaMigState(mode=mig.mode) if mig.supported and mig.mode is not None else None,
        fabric=fabric_of(reading.fabric),
    )


def fabric_of(facts: FabricFacts | None) -> NvidiaFabric | None:
    """The status block of the card's fabric; absent for a card in none."""
    if facts is None:
        return None
    return NvidiaFabric(
        state=facts.state,
        cluster_uuid=facts.cluster_uuid,
        clique_id=facts.clique_id,
        reasons=list(facts.reasons) or None,
    )


def card_of(gpu: PhysicalGPU, reading: CardReading) -> Card:
    """The offer input; ``mig_allowed`` stays at its default for the publisher to decide."""
    label = (gpu.metadata.labels or {}).get(LABEL_DEVICE)
    profiles = reading.mig.profiles if reading.mig.supported else ()
    return Card(
        physical_gpu=str(gpu.metadata.name),
        pci_address=reading.address,
        product_name=reading.product_name,
        device=label or normalize_device_model(reading.product_name),
        memory_mib=reading.memory_mib,
        vendor=IDENTITY.name,
        architecture=reading.architecture,
        compute_capability=reading.compute_cap,
        driver_version=reading.driver_version,
        uuid=reading.uuid,
        mig_profiles=tuple(_offer_profile(p) for p in profiles if p.placements),
        nvlink_domain=reading.nvlink_domain,
    )


def _api_profile(profile: ProfileFacts) -> MigProfile:
    info = profile.info
    return MigProfile(
        profile_id=info.id,
        name=info.name,
        memory_mib=info.memory_mib,
        slice_count=info.slice_count,
        max_instances=info.instance_count,
        placements=[MigPlacement(start=start, size=size) for start, size in profile.placements],
    )


def _offer_profile(profile: ProfileFacts) -> MigProfileSpec:
    info = profile.info
    return MigProfileSpec(
        profile_id=info.id,
        name=info.name,
        memory_mib=info.memory_mib,
        slice_count=info.slice_count,
        placements=tuple(Placement(start, size) for start, size in profile.placements),
        engines=Engines(
            multiprocessors=info.multiprocessor_count,
            copy_engines=info.copy_engine_count,
            decoders=info.decoder_count,
            encoders=info.encoder_count,
            jpeg_engines=info.jpeg_count,
            ofa_engines=info.ofa_count,
        ),
    )
