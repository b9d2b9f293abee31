"""A mocked pynvml for the NVIDIA adapter and backend tests, and builders shared by vendor tests.

:func:`install` patches the real ``pynvml`` module's functions with pytest-mock, so the adapter
runs its real code (ctypes placement arrays, ``NVMLError`` translation) against cards described by
:class:`FakeCard`. Values default to an A100-SXM4-40GB as the fact tables describe it. A call can
be made to fail per card (``errors={"nvmlDeviceGetName": pynvml.NVML_ERROR_GPU_IS_LOST}``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml
from kubernetes.client import V1Condition, V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import (
    CurrentState,
    DriverType,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.backends.nvidia.profiles import ProfileFacts, model_for_pci_device

A100_40GB = model_for_pci_device("20b0")
assert A100_40GB is not None


@dataclass
class FakeCard:
    name: str = "NVIDIA A100-SXM4-40GB"
    uuid: str = "GPU-1b724e78-eef5-4163-d43c-e4da15d41176"
    memory_mib: int = 40960
    compute_capability: tuple[int, int] = (8, 0)
    architecture: int = pynvml.NVML_DEVICE_ARCH_AMPERE
    board_part_number: str = "692-2G506-0200-002"
    power_constraints_mw: tuple[int, int] = (100000, 400000)
    power_limit_mw: int = 400000
    enforced_power_limit_mw: int = 350500
    mig_mode: int | None = pynvml.NVML_DEVICE_MIG_DISABLE  # None: a card without MIG
    profiles: tuple[ProfileFacts, ...] = A100_40GB.profiles  # type: ignore[union-attr]
    retired_pages_pending: int = pynvml.NVML_FEATURE_DISABLED
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    clocks_event_reasons: int = 0x1
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Handle:
    address: str


def install(
    mocker: MockerFixture,
    cards: Mapping[str, FakeCard],
    *,
    driver: str = "580.76.05",
    cuda: int = 13000,
    init_error: int | None = None,
) -> dict[str, Any]:
    """Patches pynvml to serve ``cards`` by PCI address; returns the mocks by function name."""

    def device(call: str, fn: Any) -> Any:
        def answer(handle: _Handle, *args: Any, **kwargs: Any) -> Any:
            card = cards[handle.address]
            if call in card.errors:
                raise pynvml.NVMLError(card.errors[call])
            return fn(card, *args, **kwargs)

        return answer

    def handle(address: str) -> _Handle:
        if address not in cards:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return _Handle(address)

    def init() -> None:
        if init_error is not None:
            raise pynvml.NVMLError(init_error)

    answers: dict[str, Any] = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlDeviceGetHandleByPciBusId": handle,
        "nvmlDeviceGetName": device("nvmlDeviceGetName", lambda c: c.name),
        "nvmlDeviceGetUUID": device("nvmlDeviceGetUUID", lambda c: c.uuid),
        "nvmlDeviceGetMemoryInfo": device("nvmlDeviceGetMemoryInfo", _memory),
        "nvmlDeviceGetCudaComputeCapability": device(
            "nvmlDeviceGetCudaComputeCapability", lambda c: c.compute_capability
        ),
        "nvmlDeviceGetArchitecture": device("nvmlDeviceGetArchitecture", lambda c: c.architecture),
        "nvmlDeviceGetBoardPartNumber": device("nvmlDeviceGetBoardPartNumber", lambda c: c.board_part_number),
        "nvmlDeviceGetPowerManagementLimitConstraints": device(
            "nvmlDeviceGetPowerManagementLimitConstraints", lambda c: list(c.power_constraints_mw)
        ),
        "nvmlDeviceGetPowerManagementLimit": device(
            "nvmlDeviceGetPowerManagementLimit", lambda c: c.power_limit_mw
        ),
        "nvmlDeviceGetEnforcedPowerLimit": device(
            "nvmlDeviceGetEnforcedPowerLimit", lambda c: c.enforced_power_limit_mw
        ),
        "nvmlDeviceGetMigMode": device("nvmlDeviceGetMigMode", _mig_mode),
        "nvmlDeviceGetGpuInstanceProfileInfo": device("nvmlDeviceGetGpuInstanceProfileInfo", _profile_info),
        "nvmlDeviceGetGpuInstancePossiblePlacements": device(
            "nvmlDeviceGetGpuInstancePossiblePlacements", _placements
        ),
        "nvmlDeviceGetRetiredPagesPendingStatus": device(
            "nvmlDeviceGetRetiredPagesPendingStatus", lambda c: c.retired_pages_pending
        ),
        "nvmlDeviceGetRemappedRows": device("nvmlDeviceGetRemappedRows", lambda c: c.remapped_rows),
        "nvmlDeviceGetCurrentClocksEventReasons": device(
            "nvmlDeviceGetCurrentClocksEventReasons", lambda c: c.clocks_event_reasons
        ),
    }
    return {name: mocker.patch.object(pynvml, name, side_effect=fn) for name, fn in answers.items()}


def _memory(card: FakeCard) -> Any:
    memory = pynvml.c_nvmlMemory_t()
    memory.total = card.memory_mib * 1024 * 1024
    return memory


def _mig_mode(card: FakeCard) -> list[int]:
    if card.mig_mode is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return [card.mig_mode, card.mig_mode]


def _profile_info(card: FakeCard, index: int, version: int = 2) -> Any:
    if card.mig_mode is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    profile = next((p for p in card.profiles if p.index == index), None)
    if profile is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
    fields = {
        "id": profile.info.id,
        "sliceCount": profile.info.slice_count,
        "instanceCount": profile.info.instance_count,
        "multiprocessorCount": profile.info.multiprocessor_count,
        "copyEngineCount": profile.info.copy_engine_count,
        "decoderCount": profile.info.decoder_count,
        "encoderCount": profile.info.encoder_count,
        "jpegCount": profile.info.jpeg_count,
        "ofaCount": profile.info.ofa_count,
        "memorySizeMB": profile.info.memory_mib,
    }
    for name, value in fields.items():
        setattr(info, name, value)
    info.name = f"MIG {profile.info.name}".encode()
    return info


def _placements(card: FakeCard, profile_id: int, placements: Any, count_ref: Any) -> int:
    profile = next((p for p in card.profiles if p.info.id == profile_id), None)
    if profile is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
    count = count_ref._obj  # ctypes.byref(c_uint) keeps the object it points to
    assert isinstance(count, ctypes.c_uint)
    assert count.value >= len(profile.placements)
    for i, (start, size) in enumerate(profile.placements):
        placements[i].start, placements[i].size = start, size
    count.value = len(profile.placements)
    return pynvml.NVML_SUCCESS


def physical_gpu(
    address: str = "0000:3b:00.0",
    *,
    device_id: str = "20b0",
    vendor_id: str = "10de",
    name: str = "node-1-0-10de-20b0",
    driver_type: DriverType | None = DriverType.NVIDIA,
    conditions: list[V1Condition] | None = None,
    labels: dict[str, str] | None = None,
) -> PhysicalGPU:
    """A PhysicalGPU as the node agent writes it (pciInfo, driverType), plus optional conditions."""
    return PhysicalGPU(
        metadata=V1ObjectMeta(name=name, uid=f"uid-{name}", generation=1, labels=labels or {}),
        status=PhysicalGPUStatus(
            pci_info=PciInfo(
                address=address,
                class_=PciClass(code="0302"),
                vendor=PciId(id=vendor_id),
                device=PciId(id=device_id),
            ),
            current_state=CurrentState(driver_type=driver_type) if driver_type else None,
            conditions=conditions,
        ),
    )


def sysfs_card(root: Path, address: str, device_id: str, *, driver: str | None = "nvidia") -> None:
    """Adds one NVIDIA function to a minimal sysfs tree at ``root`` (what the simulated NVML reads)."""
    device = root / "devices" / f"pci{address[:-5]}" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x10de\n")
    (device / "device").write_text(f"0x{device_id}\n")
    link = root / "bus" / "pci" / "devices" / address
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)
    if driver is not None:
        drivers = root / "bus" / "pci" / "drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        (device / "driver").symlink_to(drivers)
