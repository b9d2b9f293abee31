"""A mocked pynvml for the NVIDIA adapter and backend tests, and builders shared by vendor tests.

:func:`install` patches the real ``pynvml`` module's functions with pytest-mock, so the adapter
runs its real code (ctypes placement and handle arrays, ``NVMLError`` translation) against cards
described by :class:`FakeCard`. Values default to an A100-SXM4-40GB as the fact tables describe it.
A call can be made to fail per card (``errors={"nvmlDeviceGetName": pynvml.NVML_ERROR_GPU_IS_LOST}``).

MIG instances are handed out as real ctypes pointers (opaque handles, as the library returns
them) to structs this module keeps; the fake resolves them back by address, so the adapter's
arrays of handles are exercised exactly as with the C library.
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
    minor: int = 0
    compute_pids: tuple[int, ...] = ()
    graphics_pids: tuple[int, ...] = ()
    gpu_instances: list[FakeGpuInstance] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    # Active NVLinks as (remote device type, remote PCI bus ID); None: the card has no NVLink.
    nvlinks: tuple[tuple[int, str], ...] | None = None
    # nvmlGpuFabricInfoV: (cluster UUID bytes, clique, state, status); None: not supported.
    fabric: tuple[bytes, int, int, int] | None = None


@dataclass
class FakeComputeInstance:
    id: int
    profile_id: int
    uuid: str


@dataclass
class FakeGpuInstance:
    id: int
    profile_id: int
    start: int
    size: int
    compute_instances: list[FakeComputeInstance] = field(default_factory=list)


# Compute-instance profiles an A100 GPU instance offers, by index: (profile ID, slice count).
CI_PROFILES = {0: (0, 1), 1: (1, 2), 2: (2, 3), 3: (3, 4), 4: (4, 7)}


class _Handles:
    """Opaque ctypes handles for fake GPU/compute instances and MIG devices, resolved by address."""

    def __init__(self) -> None:
        self._objects: dict[int, tuple[str, Any]] = {}
        self._keep: list[Any] = []

    def make(self, kind: type, pointer: type, obj: tuple[str, Any]) -> Any:
        struct = kind()
        self._keep.append(struct)
        self._objects[ctypes.addressof(struct)] = obj
        return ctypes.cast(ctypes.pointer(struct), pointer)

    def resolve(self, handle: Any) -> tuple[str, Any]:
        return self._objects[ctypes.addressof(handle.contents)]


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
    answers |= _nvlink_answers(device)
    answers |= _FakeMigLibrary(cards, device).answers(answers["nvmlDeviceGetUUID"])
    return {name: mocker.patch.object(pynvml, name, side_effect=fn) for name, fn in answers.items()}


def _nvlink_answers(device: Any) -> dict[str, Any]:
    """NVLink and GPU fabric queries, as NVML answers them for the card's ``nvlinks``/``fabric``."""

    def link_of(card: FakeCard, link: int) -> tuple[int, str]:
        if card.nvlinks is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= len(card.nvlinks):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return card.nvlinks[link]

    def remote_pci(card: FakeCard, link: int) -> Any:
        info = pynvml.nvmlPciInfo_t()
        info.busId = link_of(card, link)[1].encode()
        return info

    def fabric(card: FakeCard, ref: Any) -> int:
        if card.fabric is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = ref._obj
        cluster, info.cliqueId, info.state, info.status = card.fabric
        info.clusterUuid = (ctypes.c_uint8 * 16)(*cluster)
        return int(pynvml.NVML_SUCCESS)

    return {
        "nvmlDeviceGetNvLinkState": device(
            "nvmlDeviceGetNvLinkState", lambda c, link: link_of(c, link) and 1
        ),
        "nvmlDeviceGetNvLinkRemoteDeviceType": device(
            "nvmlDeviceGetNvLinkRemoteDeviceType", lambda c, link: link_of(c, link)[0]
        ),
        "nvmlDeviceGetNvLinkRemotePciInfo": device("nvmlDeviceGetNvLinkRemotePciInfo", remote_pci),
        "nvmlDeviceGetGpuFabricInfoV": device("nvmlDeviceGetGpuFabricInfoV", fabric),
    }


class _FakeMigLibrary:
    """The MIG and preparation calls of the mocked pynvml, over the cards' instance lists."""

    def __init__(self, cards: Mapping[str, FakeCard], device: Any) -> None:
        self._cards = cards
        self._device = device
        self._handles = _Handles()

    def answers(self, card_uuid: Any) -> dict[str, Any]:
        device = self._device

        def uuid(handle: Any) -> str:
            if isinstance(handle, _Handle):
                return str(card_uuid(handle))
            return str(self._mig_value(handle, lambda gi, ci: ci.uuid))

        return {
            "nvmlDeviceGetUUID": uuid,
            "nvmlDeviceGetMinorNumber": device("nvmlDeviceGetMinorNumber", lambda c: c.minor),
            "nvmlDeviceGetComputeRunningProcesses": device(
                "nvmlDeviceGetComputeRunningProcesses", lambda c: _processes(c.compute_pids)
            ),
            "nvmlDeviceGetGraphicsRunningProcesses": device(
                "nvmlDeviceGetGraphicsRunningProcesses", lambda c: _processes(c.graphics_pids)
            ),
            "nvmlDeviceSetMigMode": device("nvmlDeviceSetMigMode", _set_mig_mode),
            "nvmlDeviceGetGpuInstances": device("nvmlDeviceGetGpuInstances", self.get_gpu_instances),
            "nvmlDeviceCreateGpuInstanceWithPlacement": device(
                "nvmlDeviceCreateGpuInstanceWithPlacement", self.create_gpu_instance
            ),
            "nvmlDeviceGetGpuInstanceById": device("nvmlDeviceGetGpuInstanceById", self.gpu_instance_by_id),
            "nvmlGpuInstanceGetInfo": self.gpu_instance_info,
            "nvmlGpuInstanceDestroy": self.destroy_gpu_instance,
            "nvmlGpuInstanceGetComputeInstanceProfileInfo": self.ci_profile_info,
            "nvmlGpuInstanceCreateComputeInstance": self.create_compute_instance,
            "nvmlGpuInstanceGetComputeInstances": self.get_compute_instances,
            "nvmlGpuInstanceGetComputeInstanceById": self.compute_instance_by_id,
            "nvmlComputeInstanceGetInfo": self.compute_instance_info,
            "nvmlComputeInstanceDestroy": self.destroy_compute_instance,
            "nvmlDeviceGetMaxMigDeviceCount": device("nvmlDeviceGetMaxMigDeviceCount", lambda c: 7),
            "nvmlDeviceGetMigDeviceHandleByIndex": device(
                "nvmlDeviceGetMigDeviceHandleByIndex", self.mig_handle_by_index
            ),
            "nvmlDeviceGetGpuInstanceId": lambda h: self._mig_value(h, lambda gi, ci: gi.id),
            "nvmlDeviceGetComputeInstanceId": lambda h: self._mig_value(h, lambda gi, ci: ci.id),
        }

    def _address_of(self, card: FakeCard) -> str:
        return next(a for a, c in self._cards.items() if c is card)

    def _gi_handle(self, address: str, gi: FakeGpuInstance) -> Any:
        return self._handles.make(
            pynvml.struct_c_nvmlGpuInstance_t, pynvml.c_nvmlGpuInstance_t, (address, gi)
        )

    def _ci_handle(self, address: str, ci: FakeComputeInstance) -> Any:
        return self._handles.make(
            pynvml.struct_c_nvmlComputeInstance_t, pynvml.c_nvmlComputeInstance_t, (address, ci)
        )

    def get_gpu_instances(self, card: FakeCard, profile_id: int, array: Any, count_ref: Any) -> int:
        found = [gi for gi in card.gpu_instances if gi.profile_id == profile_id]
        count = count_ref._obj
        assert count.value >= len(found), "the adapter sized the array by the profile's instance count"
        for i, gi in enumerate(found):
            array[i] = self._gi_handle(self._address_of(card), gi)
        count.value = len(found)
        return int(pynvml.NVML_SUCCESS)

    def create_gpu_instance(self, card: FakeCard, profile_id: int, placement_ref: Any) -> Any:
        placement = placement_ref._obj
        taken = {s for gi in card.gpu_instances for s in range(gi.start, gi.start + gi.size)}
        if taken & set(range(placement.start, placement.start + placement.size)):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi = FakeGpuInstance(
            id=len(card.gpu_instances) + 1, profile_id=profile_id, start=placement.start, size=placement.size
        )
        card.gpu_instances.append(gi)
        return self._gi_handle(self._address_of(card), gi)

    def gpu_instance_by_id(self, card: FakeCard, gpu_instance: int) -> Any:
        gi = next((g for g in card.gpu_instances if g.id == gpu_instance), None)
        if gi is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return self._gi_handle(self._address_of(card), gi)

    def gpu_instance_info(self, handle: Any) -> Any:
        _address, gi = self._handles.resolve(handle)
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id, info.profileId = gi.id, gi.profile_id
        info.placement.start, info.placement.size = gi.start, gi.size
        return info

    def destroy_gpu_instance(self, handle: Any) -> int:
        address, gi = self._handles.resolve(handle)
        if gi.compute_instances:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_IN_USE)
        self._cards[address].gpu_instances.remove(gi)
        return int(pynvml.NVML_SUCCESS)

    def ci_profile_info(self, handle: Any, index: int, engine: int, version: int = 2) -> Any:
        _address, gi = self._handles.resolve(handle)
        if index not in CI_PROFILES or CI_PROFILES[index][1] > gi.size:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
        info.id, info.sliceCount = CI_PROFILES[index]
        info.instanceCount = gi.size // CI_PROFILES[index][1]
        return info

    def create_compute_instance(self, handle: Any, profile_id: int) -> Any:
        address, gi = self._handles.resolve(handle)
        index = len(gi.compute_instances)
        ci = FakeComputeInstance(id=index, profile_id=profile_id, uuid=f"MIG-fake-{gi.id}-{index}")
        gi.compute_instances.append(ci)
        return self._ci_handle(address, ci)

    def get_compute_instances(self, handle: Any, profile_id: int, array: Any, count_ref: Any) -> int:
        address, gi = self._handles.resolve(handle)
        found = [ci for ci in gi.compute_instances if ci.profile_id == profile_id]
        count = count_ref._obj
        for i, ci in enumerate(found):
            array[i] = self._ci_handle(address, ci)
        count.value = len(found)
        return int(pynvml.NVML_SUCCESS)

    def compute_instance_by_id(self, handle: Any, compute_instance: int) -> Any:
        address, gi = self._handles.resolve(handle)
        ci = next((c for c in gi.compute_instances if c.id == compute_instance), None)
        if ci is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return self._ci_handle(address, ci)

    def compute_instance_info(self, handle: Any) -> Any:
        _address, ci = self._handles.resolve(handle)
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        info.id, info.profileId = ci.id, ci.profile_id
        return info

    def destroy_compute_instance(self, handle: Any) -> int:
        address, ci = self._handles.resolve(handle)
        for gi in self._cards[address].gpu_instances:
            if ci in gi.compute_instances:
                gi.compute_instances.remove(ci)
        return int(pynvml.NVML_SUCCESS)

    def mig_handle_by_index(self, card: FakeCard, index: int) -> Any:
        devices = [(gi, ci) for gi in card.gpu_instances for ci in gi.compute_instances]
        if index >= len(devices):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return self._handles.make(
            pynvml.struct_c_nvmlDevice_t, pynvml.c_nvmlDevice_t, ("mig", devices[index])
        )

    def _mig_value(self, handle: Any, pick: Any) -> Any:
        kind, value = self._handles.resolve(handle)
        assert kind == "mig"
        return pick(*value)


def _processes(pids: tuple[int, ...]) -> list[Any]:
    return [type("Process", (), {"pid": pid})() for pid in pids]


def _memory(card: FakeCard) -> Any:
    memory = pynvml.c_nvmlMemory_t()
    memory.total = card.memory_mib * 1024 * 1024
    return memory


def _mig_mode(card: FakeCard) -> list[int]:
    if card.mig_mode is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return [card.mig_mode, card.mig_mode]


def _set_mig_mode(card: FakeCard, mode: int) -> int:
    if card.mig_mode is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    if card.gpu_instances or card.compute_pids:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_IN_USE)
    card.mig_mode = mode
    return int(pynvml.NVML_SUCCESS)  # the activation status


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
    return int(pynvml.NVML_SUCCESS)


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
