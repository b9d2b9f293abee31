"""The real NVML adapter: :class:`~pkg.backends.nvidia.nvml_port.Nvml` over ``pynvml`` (nvidia-ml-py).

Why so thin: everything that interprets NVML (units, fallbacks, filling rules) lives in the
backend, where it also runs against the simulated adapter. This module only calls the library,
converts its ctypes results to plain values and turns ``pynvml.NVMLError`` into
:class:`~pkg.backends.nvidia.nvml_port.NvmlError` naming the call and the card.

Lifecycle: NVML is initialised once per process, lazily, under a lock, by the first call. If that
fails (driver not loaded yet: the gpu-handler may start before the driver on a fresh node), the
call raises and the next call tries again, so the process recovers without a restart.
:meth:`PynvmlAdapter.close` shuts NVML down once at process exit. NVML itself is thread-safe, so
calls after initialisation take no lock.

Device handles are looked up by PCI bus ID on every call rather than cached: a handle is only
valid until the driver reloads or the card is reset, and the lookup is cheap next to the API
writes that follow.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Final, TypeVar

import pynvml

from pkg.backends.nvidia.nvml_port import (
    GPU_INSTANCE_PROFILE_COUNT,
    NO_INSTANCE,
    ComputeInstanceInfo,
    GpuFabricInfo,
    GpuInstanceInfo,
    GpuInstanceProfileInfo,
    NvLink,
    NvmlError,
    NvmlEvent,
    NvmlReturn,
    ProcessInfo,
    ProcessUtilization,
    RemappedRows,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
_MAX_PLACEMENTS: Final = 32  # more than any card's memory slices (8 on A100/H100/B200)
_MIG_NAME_PREFIX: Final = "MIG "
_COMPUTE_INSTANCE_PROFILE_COUNT: Final = 9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
_ENGINE_PROFILE_SHARED: Final = 0  # NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
# nvmlGpuFabricInfo structs with the health mask, newest first, asked of nvmlDeviceGetGpuFabricInfoV.
_FABRIC_STRUCTS: Final = ("c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfo_v2_t")
# A profile index the card or driver does not have answers one of these; the walk skips it.
_ABSENT_PROFILE: Final = (NvmlReturn.NOT_SUPPORTED, NvmlReturn.INVALID_ARGUMENT, NvmlReturn.NOT_FOUND)


class PynvmlAdapter:
    """NVML through nvidia-ml-py. ``library`` is the ``pynvml`` module (a test may pass a fake)."""

    def __init__(self, *, library: ModuleType = pynvml) -> None:
        self._nvml = library
        self._lock = threading.Lock()
        self._initialized = False

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._initialized:
                return
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as exc:
                logger.warning("nvmlShutdown failed: %s", exc)

    def _ensure_initialized(self) -> None:
        if self._initialized:
            return
        with self._lock:
            if self._initialized:
                return
            try:
                self._nvml.nvmlInit()
            except self._nvml.NVMLError as exc:
                raise _error("nvmlInit", None, exc) from exc
            self._initialized = True
            logger.info("NVML initialised")

    def _system(self, call: str, fn: Callable[[], T]) -> T:
        self._ensure_initialized()
        try:
            return fn()
        except self._nvml.NVMLError as exc:
            raise _error(call, None, exc) from exc

    def _device(self, call: str, address: str, fn: Callable[[Any], T]) -> T:
        self._ensure_initialized()
        try:
            handle = self._nvml.nvmlDeviceGetHandleByPciBusId(address)
            return fn(handle)
        except self._nvml.NVMLError as exc:
            raise _error(call, address, exc) from exc

    # -- system ----------------------------------------------------------------------------------

    def driver_version(self) -> str:
        return _text(self._system("nvmlSystemGetDriverVersion", self._nvml.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> int:
        return int(self._system("nvmlSystemGetCudaDriverVersion", self._nvml.nvmlSystemGetCudaDriverVersion))

    # -- one card --------------------------------------------------------------------------------

    def name(self, address: str) -> str:
        return _text(self._device("nvmlDeviceGetName", address, self._nvml.nvmlDeviceGetName))

    def uuid(self, address: str) -> str:
        return _text(self._device("nvmlDeviceGetUUID", address, self._nvml.nvmlDeviceGetUUID))

    def memory_total_bytes(self, address: str) -> int:
        info = self._device("nvmlDeviceGetMemoryInfo", address, self._nvml.nvmlDeviceGetMemoryInfo)
        return int(info.total)

    def cuda_compute_capability(self, address: str) -> tuple[int, int]:
        major, minor = self._device(
            "nvmlDeviceGetCudaComputeCapability", address, self._nvml.nvmlDeviceGetCudaComputeCapability
        )
        return int(major), int(minor)

    def architecture(self, address: str) -> int:
        return int(self._device("nvmlDeviceGetArchitecture", address, self._nvml.nvmlDeviceGetArchitecture))

    def board_part_number(self, address: str) -> str:
        call = "nvmlDeviceGetBoardPartNumber"
        return _text(self._device(call, address, self._nvml.nvmlDeviceGetBoardPartNumber))

    def power_limit_constraints_mw(self, address: str) -> tuple[int, int]:
        call = "nvmlDeviceGetPowerManagementLimitConstraints"
        low, high = self._device(call, address, self._nvml.nvmlDeviceGetPowerManagementLimitConstraints)
        return int(low), int(high)

    def power_limit_mw(self, address: str) -> int:
        call = "nvmlDeviceGetPowerManagementLimit"
        return int(self._device(call, address, self._nvml.nvmlDeviceGetPowerManagementLimit))

    def enforced_power_limit_mw(self, address: str) -> int:
        call = "nvmlDeviceGetEnforcedPowerLimit"
        return int(self._device(call, address, self._nvml.nvmlDeviceGetEnforcedPowerLimit))

    def mig_mode(self, address: str) -> tuple[int, int]:
        current, pending = self._device("nvmlDeviceGetMigMode", address, self._nvml.nvmlDeviceGetMigMode)
        return int(current), int(pending)

    def gpu_instance_profile_info(self, address: str, profile_index: int) -> GpuInstanceProfileInfo:
        def query(handle: Any) -> Any:
            return self._nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile_index, version=2)

        info = self._device("nvmlDeviceGetGpuInstanceProfileInfoV", address, query)
        name = _text(info.name)
        return GpuInstanceProfileInfo(
            id=int(info.id),
            name=name.removeprefix(_MIG_NAME_PREFIX),
            slice_count=int(info.sliceCount),
            instance_count=int(info.instanceCount),
            memory_mib=int(info.memorySizeMB),
            multiprocessor_count=int(info.multiprocessorCount),
            copy_engine_count=int(info.copyEngineCount),
            decoder_count=int(info.decoderCount),
            encoder_count=int(info.encoderCount),
            jpeg_count=int(info.jpegCount),
            ofa_count=int(info.ofaCount),
        )

    def gpu_instance_possible_placements(self, address: str, profile_id: int) -> list[tuple[int, int]]:
        def query(handle: Any) -> list[tuple[int, int]]:
            placements = (self._nvml.c_nvmlGpuInstancePlacement_t * _MAX_PLACEMENTS)()
            count = ctypes.c_uint(_MAX_PLACEMENTS)
            self._nvml.nvmlDeviceGetGpuInstancePossiblePlacements(
                handle, profile_id, placements, ctypes.byref(count)
            )
            return [(int(p.start), int(p.size)) for p in placements[: count.value]]

        return self._device("nvmlDeviceGetGpuInstancePossiblePlacements_v2", address, query)

    def retired_pages_pending(self, address: str) -> bool:
        call = "nvmlDeviceGetRetiredPagesPendingStatus"
        return bool(self._device(call, address, self._nvml.nvmlDeviceGetRetiredPagesPendingStatus))

    def remapped_rows(self, address: str) -> RemappedRows:
        corr, unc, pending, failure = self._device(
            "nvmlDeviceGetRemappedRows", address, self._nvml.nvmlDeviceGetRemappedRows
        )
        return RemappedRows(
            correctable=int(corr), uncorrectable=int(unc), pending=bool(pending), failure=bool(failure)
        )

    def clocks_event_reasons(self, address: str) -> int:
        call = "nvmlDeviceGetCurrentClocksEventReasons"
        return int(self._device(call, address, self._nvml.nvmlDeviceGetCurrentClocksEventReasons))

    # -- device preparation ----------------------------------------------------------------------

    def minor_number(self, address: str) -> int:
        return int(self._device("nvmlDeviceGetMinorNumber", address, self._nvml.nvmlDeviceGetMinorNumber))

    def running_processes(self, address: str) -> list[int]:
        def query(handle: Any) -> list[int]:
            pids = {int(p.pid) for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
            pids |= {int(p.pid) for p in self._nvml.nvmlDeviceGetGraphicsRunningProcesses(handle)}
            return sorted(pids)

        return self._device("nvmlDeviceGetComputeRunningProcesses", address, query)

    def processes(self, address: str) -> list[ProcessInfo]:
        def query(handle: Any) -> list[ProcessInfo]:
            found: dict[tuple[int, int, int], ProcessInfo] = {}
            listed = [
                *self._nvml.nvmlDeviceGetComputeRunningProcesses(handle),
                *self._nvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
            ]
            for entry in listed:
                info = ProcessInfo(
                    pid=int(entry.pid),
                    used_memory_bytes=_known(getattr(entry, "usedGpuMemory", None)),
                    gpu_instance=int(getattr(entry, "gpuInstanceId", NO_INSTANCE)),
                    compute_instance=int(getattr(entry, "computeInstanceId", NO_INSTANCE)),
                )
                found.setdefault((info.pid, info.gpu_instance, info.compute_instance), info)
            return list(found.values())

        return self._device("nvmlDeviceGetComputeRunningProcesses", address, query)

    def process_utilization(self, address: str, since_us: int) -> list[ProcessUtilization]:
        def query(handle: Any) -> list[ProcessUtilization]:
            try:
                samples = self._nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
            except self._nvml.NVMLError as exc:
                if exc.value == NvmlReturn.NOT_FOUND:  # no sample newer than since_us
                    return []
                raise
            return [
                ProcessUtilization(
                    pid=int(s.pid),
                    timestamp_us=int(s.timeStamp),
                    sm_percent=int(s.smUtil),
                    memory_percent=int(s.memUtil),
                )
                for s in samples
            ]

        return self._device("nvmlDeviceGetProcessUtilization", address, query)

    def total_energy_mj(self, address: str) -> int:
        return int(
            self._device(
                "nvmlDeviceGetTotalEnergyConsumption", address, self._nvml.nvmlDeviceGetTotalEnergyConsumption
            )
        )

    def set_mig_mode(self, address: str, mode: int) -> None:
        def change(handle: Any) -> None:
            self._nvml.nvmlDeviceSetMigMode(handle, mode)

        self._device("nvmlDeviceSetMigMode", address, change)

    def compute_mode(self, address: str) -> int:
        return int(self._device("nvmlDeviceGetComputeMode", address, self._nvml.nvmlDeviceGetComputeMode))

    def set_compute_mode(self, address: str, mode: int) -> None:
        def change(handle: Any) -> None:
            self._nvml.nvmlDeviceSetComputeMode(handle, mode)

        self._device("nvmlDeviceSetComputeMode", address, change)

    def gpu_instances(self, address: str) -> list[GpuInstanceInfo]:
        def query(handle: Any) -> list[GpuInstanceInfo]:
            found = []
            for index in range(GPU_INSTANCE_PROFILE_COUNT):
                profile = self._optional(self._nvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, index)
                if profile is None or not profile.instanceCount:
                    continue
                instances = (self._nvml.c_nvmlGpuInstance_t * int(profile.instanceCount))()
                count = ctypes.c_uint(int(profile.instanceCount))
                self._nvml.nvmlDeviceGetGpuInstances(handle, profile.id, instances, ctypes.byref(count))
                found += [
                    _gpu_instance(self._nvml.nvmlGpuInstanceGetInfo(gi)) for gi in instances[: count.value]
                ]
            return sorted(found, key=lambda gi: gi.id)

        return self._device("nvmlDeviceGetGpuInstances", address, query)

    def create_gpu_instance(self, address: str, *, profile_id: int, start: int, size: int) -> GpuInstanceInfo:
        def create(handle: Any) -> GpuInstanceInfo:
            placement = self._nvml.c_nvmlGpuInstancePlacement_t()
            placement.start, placement.size = start, size
            gi = self._nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
                handle, profile_id, ctypes.byref(placement)
            )
            return _gpu_instance(self._nvml.nvmlGpuInstanceGetInfo(gi))

        return self._device("nvmlDeviceCreateGpuInstanceWithPlacement", address, create)

    def destroy_gpu_instance(self, address: str, gpu_instance: int) -> None:
        def destroy(handle: Any) -> None:
            self._nvml.nvmlGpuInstanceDestroy(self._nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance))

        self._device("nvmlGpuInstanceDestroy", address, destroy)

    def compute_instances(self, address: str, gpu_instance: int) -> list[ComputeInstanceInfo]:
        def query(handle: Any) -> list[ComputeInstanceInfo]:
            gi = self._nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance)
            found = []
            for profile in self._compute_profiles(gi):
                instances = (self._nvml.c_nvmlComputeInstance_t * int(profile.instanceCount))()
                count = ctypes.c_uint(int(profile.instanceCount))
                self._nvml.nvmlGpuInstanceGetComputeInstances(gi, profile.id, instances, ctypes.byref(count))
                found += [
                    _compute_instance(self._nvml.nvmlComputeInstanceGetInfo(ci))
                    for ci in instances[: count.value]
                ]
            return sorted(found, key=lambda ci: ci.id)

        return self._device("nvmlGpuInstanceGetComputeInstances", address, query)

    def create_compute_instance(self, address: str, gpu_instance: int) -> ComputeInstanceInfo:
        def create(handle: Any) -> ComputeInstanceInfo:
            gi = self._nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance)
            profiles = self._compute_profiles(gi)
            if not profiles:
                raise self._nvml.NVMLError(int(NvmlReturn.NOT_SUPPORTED))
            whole = max(profiles, key=lambda p: int(p.sliceCount))
            ci = self._nvml.nvmlGpuInstanceCreateComputeInstance(gi, whole.id)
            return _compute_instance(self._nvml.nvmlComputeInstanceGetInfo(ci))

        return self._device("nvmlGpuInstanceCreateComputeInstance", address, create)

    def destroy_compute_instance(self, address: str, gpu_instance: int, compute_instance: int) -> None:
        def destroy(handle: Any) -> None:
            gi = self._nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance)
            ci = self._nvml.nvmlGpuInstanceGetComputeInstanceById(gi, compute_instance)
            self._nvml.nvmlComputeInstanceDestroy(ci)

        self._device("nvmlComputeInstanceDestroy", address, destroy)

    def mig_device_uuid(self, address: str, gpu_instance: int, compute_instance: int) -> str:
        def query(handle: Any) -> str:
            for index in range(int(self._nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
                mig = self._optional(self._nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, index)
                if mig is None:
                    continue
                if (
                    int(self._nvml.nvmlDeviceGetGpuInstanceId(mig)) == gpu_instance
                    and int(self._nvml.nvmlDeviceGetComputeInstanceId(mig)) == compute_instance
                ):
                    return _text(self._nvml.nvmlDeviceGetUUID(mig))
            raise self._nvml.NVMLError(int(NvmlReturn.NOT_FOUND))

        return self._device("nvmlDeviceGetMigDeviceHandleByIndex", address, query)

    # -- health events ---------------------------------------------------------------------------

    def open_events(self, addresses: Sequence[str], event_types: int) -> PynvmlEventSet:
        event_set = self._system("nvmlEventSetCreate", self._nvml.nvmlEventSetCreate)
        handles: dict[int, str] = {}
        try:
            for address in addresses:

                def register(handle: Any, address: str = address) -> None:
                    supported = int(self._nvml.nvmlDeviceGetSupportedEventTypes(handle))
                    if event_types & supported:
                        self._nvml.nvmlDeviceRegisterEvents(handle, event_types & supported, event_set)
                    handles[_handle_key(handle)] = address

                self._device("nvmlDeviceRegisterEvents", address, register)
        except NvmlError:
            self._nvml.nvmlEventSetFree(event_set)
            raise
        return PynvmlEventSet(library=self._nvml, event_set=event_set, addresses=handles)

    def _compute_profiles(self, gi: Any) -> list[Any]:
        """The compute-instance profiles the GPU instance supports (shared engines)."""
        profiles = []
        for index in range(_COMPUTE_INSTANCE_PROFILE_COUNT):
            profile = self._optional(
                self._nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, index, _ENGINE_PROFILE_SHARED
            )
            if profile is not None and int(profile.instanceCount):
                profiles.append(profile)
        return profiles

    def active_nvlinks(self, address: str) -> list[NvLink]:
        def query(handle: Any) -> list[NvLink]:
            links = []
            for link in range(int(getattr(self._nvml, "NVML_NVLINK_MAX_LINKS", 18))):
                try:
                    active = int(self._nvml.nvmlDeviceGetNvLinkState(handle, link))
                except self._nvml.NVMLError as exc:
                    # Past the card's last link NVML says INVALID_ARGUMENT or NOT_SUPPORTED; on link
                    # 0, NOT_SUPPORTED means no NVLink at all and is raised for the caller.
                    code = int(getattr(exc, "value", 0))
                    if code == NvmlReturn.INVALID_ARGUMENT or (link and code == NvmlReturn.NOT_SUPPORTED):
                        break
                    raise
                if not active:
                    continue
                remote = self._nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link)
                links.append(
                    NvLink(
                        link=link,
                        remote_type=int(self._nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)),
                        remote_bus_id=_text(remote.busId),
                    )
                )
            return links

        return self._device("nvmlDeviceGetNvLinkState", address, query)

    def gpu_fabric_info(self, address: str) -> GpuFabricInfo:
        """The newest struct the driver takes: ``v3`` (health mask and summary), else ``v2`` (the
        mask), else the older call without a version (no mask; drivers before R550)."""

        def query(handle: Any) -> GpuFabricInfo:
            for struct in _FABRIC_STRUCTS:
                make = getattr(self._nvml, struct, None)
                if make is None:  # an older nvidia-ml-py
                    continue
                info = make()
                try:
                    self._nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
                except self._nvml.NVMLError as exc:
                    code = int(getattr(exc, "value", 0))
                    if code == NvmlReturn.ARGUMENT_VERSION_MISMATCH:
                        continue  # a driver that knows an older version of the struct
                    if code == NvmlReturn.FUNCTION_NOT_FOUND:
                        break
                    raise
                return _fabric(info, health_mask=int(info.healthMask))
            info = self._nvml.c_nvmlGpuFabricInfo_t()
            self._nvml.nvmlDeviceGetGpuFabricInfo(handle, ctypes.byref(info))
            return _fabric(info, health_mask=None)

        return self._device("nvmlDeviceGetGpuFabricInfoV", address, query)

    def _optional(self, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``, or None when NVML says the thing asked for does not exist here."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            if int(getattr(exc, "value", 0)) in _ABSENT_PROFILE:
                return None
            raise


def _gpu_instance(info: Any) -> GpuInstanceInfo:
    return GpuInstanceInfo(
        id=int(info.id),
        profile_id=int(info.profileId),
        start=int(info.placement.start),
        size=int(info.placement.size),
    )


def _fabric(info: Any, *, health_mask: int | None) -> GpuFabricInfo:
    return GpuFabricInfo(
        cluster_uuid=str(uuid.UUID(bytes=bytes(info.clusterUuid))),
        clique_id=int(info.cliqueId),
        state=int(info.state),
        status=int(info.status),
        health_mask=health_mask,
    )


def _compute_instance(info: Any) -> ComputeInstanceInfo:
    return ComputeInstanceInfo(id=int(info.id), profile_id=int(info.profileId))


class PynvmlEventSet:
    """An ``nvmlEventSet_t``; events name their card by handle, mapped back to its PCI address."""

    def __init__(self, *, library: ModuleType, event_set: Any, addresses: dict[int, str]) -> None:
        self._nvml = library
        self._set = event_set
        self._addresses = addresses

    def wait(self, timeout_ms: int) -> NvmlEvent | None:
        try:
            data = self._nvml.nvmlEventSetWait_v2(self._set, timeout_ms)
        except self._nvml.NVMLError as exc:
            if int(getattr(exc, "value", 0)) == NvmlReturn.TIMEOUT:
                return None
            raise _error("nvmlEventSetWait_v2", None, exc) from exc
        return NvmlEvent(
            address=self._addresses.get(_handle_key(data.device), "unknown"),
            event_type=int(data.eventType),
            data=int(data.eventData),
            gpu_instance=int(getattr(data, "gpuInstanceId", NO_INSTANCE)),
            compute_instance=int(getattr(data, "computeInstanceId", NO_INSTANCE)),
        )

    def free(self) -> None:
        try:
            self._nvml.nvmlEventSetFree(self._set)
        except self._nvml.NVMLError as exc:
            logger.warning("nvmlEventSetFree failed: %s", exc)


def _handle_key(handle: Any) -> int:
    """A device handle's identity: the pointer NVML gave out (the same card, the same pointer)."""
    try:
        value = ctypes.cast(handle, ctypes.c_void_p).value
    except (ctypes.ArgumentError, TypeError):
        return id(handle)
    return int(value) if value is not None else id(handle)


def _error(call: str, address: str | None, exc: Any) -> NvmlError:
    code = int(getattr(exc, "value", NvmlReturn.UNKNOWN))
    return NvmlError(call=call, code=code, message=str(exc), address=address)


def _text(value: Any) -> str:
    """NVML strings arrive as ``str`` (decorated calls) or ``bytes`` (struct fields)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


__all__ = ["PynvmlAdapter"]


def _known(value: Any) -> int | None:
    """A memory figure NVML reports, or ``None`` for its "not available" marker (pynvml gives
    ``None``; the raw value is ``NVML_VALUE_NOT_AVAILABLE``, all bits set)."""
    if value is None:
        return None
    number = int(value)
    return None if number < 0 or number >= 0xFFFFFFFFFFFFFFFF else number
