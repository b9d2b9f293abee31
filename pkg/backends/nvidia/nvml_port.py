"""The NVML port: the few NVML calls the NVIDIA backend makes, in plain Python types.

Two adapters implement :class:`Nvml`: :class:`~pkg.backends.nvidia.nvml.PynvmlAdapter` over the
real library (nvidia-ml-py), and :class:`~pkg.backends.simulated.fake_nvml.SimulatedNvml`, which
answers from the model tables of real cards. The backend above it is the same code in both
cases, so the simulation exercises the real enrichment logic
(docs/architecture.md#hardware-behind-narrow-adapters).

The port keeps NVML's semantics and units, because that is what the adapters must agree on:
memory in bytes, power in milliwatts, the CUDA version as NVML's integer (13000 = 13.0), MIG mode
and architecture as NVML's enum values, placements in memory slices. Each per-card method takes
the card's PCI address (``0000:3b:00.0``) rather than a handle, so no handle outlives a driver
reload, and each failure is an :class:`NvmlError` that names the call and the card: one card's
error never reaches another card's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Protocol, TypeVar

GPU_INSTANCE_PROFILE_COUNT: Final = 18  # NVML_GPU_INSTANCE_PROFILE_COUNT: profile indexes 0..17
MIG_DISABLED: Final = 0  # NVML_DEVICE_MIG_DISABLE
MIG_ENABLED: Final = 1  # NVML_DEVICE_MIG_ENABLE
COMPUTE_MODE_DEFAULT: Final = 0  # NVML_COMPUTEMODE_DEFAULT
COMPUTE_MODE_EXCLUSIVE_PROCESS: Final = 3  # NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
CLOCKS_EVENT_SW_THERMAL: Final = 0x20  # nvmlClocksEventReasonSwThermalSlowdown
CLOCKS_EVENT_HW_THERMAL: Final = 0x40  # nvmlClocksEventReasonHwThermalSlowdown
# nvmlEventType* bits of the events that say something about the card's health (nvml.h).
EVENT_SINGLE_BIT_ECC: Final = 0x1
EVENT_DOUBLE_BIT_ECC: Final = 0x2
EVENT_XID_CRITICAL: Final = 0x8
EVENT_SINGLE_BIT_ECC_STORM: Final = 0x200
EVENT_DRAM_RETIREMENT: Final = 0x400
EVENT_DRAM_RETIREMENT_FAILURE: Final = 0x800
EVENT_NON_FATAL_POISON: Final = 0x1000
EVENT_FATAL_POISON: Final = 0x2000
EVENT_GPU_UNAVAILABLE: Final = 0x4000
NO_INSTANCE: Final = 0xFFFFFFFF  # gpuInstanceId/computeInstanceId of an event not tied to MIG
NVLINK_DEVICE_TYPE_GPU: Final = 0x00  # NVML_NVLINK_DEVICE_TYPE_GPU
NVLINK_DEVICE_TYPE_SWITCH: Final = 0x02  # NVML_NVLINK_DEVICE_TYPE_SWITCH
# nvmlGpuFabricState_t: where the card is in joining an NVLink fabric.
GPU_FABRIC_STATE_NOT_SUPPORTED: Final = 0  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
GPU_FABRIC_STATE_NOT_STARTED: Final = 1  # NVML_GPU_FABRIC_STATE_NOT_STARTED
GPU_FABRIC_STATE_IN_PROGRESS: Final = 2  # NVML_GPU_FABRIC_STATE_IN_PROGRESS
GPU_FABRIC_STATE_COMPLETED: Final = 3  # NVML_GPU_FABRIC_STATE_COMPLETED
NO_FABRIC_CLUSTER: Final = "00000000-0000-0000-0000-000000000000"  # the cluster UUID of no fabric
# The fabric health mask (``healthMask`` of nvmlGpuFabricInfo_v2/v3): fields of ``width`` bits at
# ``shift``. The yes/no fields read NOT_SUPPORTED (0), TRUE (1: the fault is present) or FALSE (2).
GPU_FABRIC_HEALTH_NOT_SUPPORTED: Final = 0  # NVML_GPU_FABRIC_HEALTH_MASK_*_NOT_SUPPORTED
GPU_FABRIC_HEALTH_TRUE: Final = 1  # NVML_GPU_FABRIC_HEALTH_MASK_*_TRUE
GPU_FABRIC_HEALTH_FALSE: Final = 2  # NVML_GPU_FABRIC_HEALTH_MASK_*_FALSE
GPU_FABRIC_HEALTH_SHIFT_DEGRADED_BW: Final = 0  # NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
GPU_FABRIC_HEALTH_SHIFT_ROUTE_RECOVERY: Final = 2  # NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY
GPU_FABRIC_HEALTH_SHIFT_ROUTE_UNHEALTHY: Final = 4  # NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY
GPU_FABRIC_HEALTH_SHIFT_ACCESS_TIMEOUT_RECOVERY: Final = 6  # …_SHIFT_ACCESS_TIMEOUT_RECOVERY
GPU_FABRIC_HEALTH_WIDTH_FLAG: Final = 0x3  # NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_{DEGRADED_BW,ROUTE_*,…}
GPU_FABRIC_HEALTH_SHIFT_INCORRECT_CONFIGURATION: Final = 8  # …_SHIFT_INCORRECT_CONFIGURATION
GPU_FABRIC_HEALTH_WIDTH_INCORRECT_CONFIGURATION: Final = 0xF  # …_WIDTH_INCORRECT_CONFIGURATION
# NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*: 0 not supported, 1 none, then the faults.
GPU_FABRIC_CONFIGURATION_NONE: Final = 1
GPU_FABRIC_CONFIGURATION_INCORRECT_SYSGUID: Final = 2
GPU_FABRIC_CONFIGURATION_INCORRECT_CHASSIS_SN: Final = 3
GPU_FABRIC_CONFIGURATION_NO_PARTITION: Final = 4
GPU_FABRIC_CONFIGURATION_INSUFFICIENT_NVLINKS: Final = 5
GPU_FABRIC_CONFIGURATION_INCOMPATIBLE_GPU_FW: Final = 6
GPU_FABRIC_CONFIGURATION_INVALID_LOCATION: Final = 7
GPU_FABRIC_CONFIGURATION_GPU_STATE_INVALID: Final = 8


class NvmlReturn(IntEnum):
    """The ``nvmlReturn_t`` codes the backend tells apart (values as in nvml.h)."""

    UNINITIALIZED = 1
    INVALID_ARGUMENT = 2
    NOT_SUPPORTED = 3
    NO_PERMISSION = 4
    NOT_FOUND = 6
    INSUFFICIENT_SIZE = 7
    DRIVER_NOT_LOADED = 9
    TIMEOUT = 10
    LIBRARY_NOT_FOUND = 12
    FUNCTION_NOT_FOUND = 13
    GPU_IS_LOST = 15
    RESET_REQUIRED = 16
    LIB_RM_VERSION_MISMATCH = 18
    IN_USE = 19
    INSUFFICIENT_RESOURCES = 23
    ARGUMENT_VERSION_MISMATCH = 25
    UNKNOWN = 999


def return_reason(code: int) -> str:
    """An ``nvmlReturn_t`` as a CamelCase reason for conditions and logs, e.g. ``NvmlGpuIsLost``."""
    try:
        name = NvmlReturn(code).name
    except ValueError:
        return "NvmlError"
    return "Nvml" + "".join(part.title() for part in name.split("_"))


class NvmlError(Exception):
    """An NVML call failed. ``code`` is the raw ``nvmlReturn_t``; ``address`` is ``None`` for
    system-wide calls (init, driver version)."""

    def __init__(self, *, call: str, code: int, message: str, address: str | None = None) -> None:
        where = f" for GPU {address}" if address else ""
        super().__init__(f"{call}{where}: {message} (NVML error {code})")
        self.call, self.code, self.address, self.message = call, code, address, message

    @property
    def not_supported(self) -> bool:
        """The card or driver does not offer this query: the field is simply absent."""
        return self.code in (NvmlReturn.NOT_SUPPORTED, NvmlReturn.FUNCTION_NOT_FOUND)

    @property
    def reason(self) -> str:
        """A CamelCase reason for conditions and logs, e.g. ``NvmlGpuIsLost``."""
        return return_reason(self.code)


@dataclass(frozen=True, kw_only=True)
class GpuInstanceProfileInfo:
    """``nvmlGpuInstanceProfileInfo_v2_t``. ``id`` is the profile ID (``-cgi 9``), not the index
    passed to the query; ``name`` has NVML's ``MIG `` prefix removed."""

    id: int
    name: str
    slice_count: int
    instance_count: int
    memory_mib: int
    multiprocessor_count: int
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int


@dataclass(frozen=True, kw_only=True)
class GpuInstanceInfo:
    """``nvmlGpuInstanceInfo_t``: a GPU instance, its profile ID and its placement in memory slices."""

    id: int
    profile_id: int
    start: int
    size: int


@dataclass(frozen=True, kw_only=True)
class ComputeInstanceInfo:
    """``nvmlComputeInstanceInfo_t``: a compute instance of a GPU instance and its profile ID."""

    id: int
    profile_id: int


@dataclass(frozen=True, kw_only=True)
class RemappedRows:
    """``nvmlDeviceGetRemappedRows``: counts of remapped rows, a remap pending (reset needed) and
    a remap that failed (the memory is out of spare rows)."""

    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


@dataclass(frozen=True, kw_only=True)
class NvLink:
    """One *active* NVLink of a card (``nvmlDeviceGetNvLinkState``): what is at its other end
    (``nvmlDeviceGetNvLinkRemoteDeviceType``: a GPU, an NVSwitch) and that device's PCI bus ID as
    NVML writes it (``nvmlDeviceGetNvLinkRemotePciInfo_v2``, ``00000000:05:00.0``)."""

    link: int
    remote_type: int
    remote_bus_id: str


@dataclass(frozen=True, kw_only=True)
class GpuFabricInfo:
    """``nvmlGpuFabricInfoV_t``: whether the card joined an NVLink fabric (``state``,
    :data:`GPU_FABRIC_STATE_COMPLETED` once done, ``status`` its ``nvmlReturn_t``), and the fabric's
    cluster UUID and clique: cards of one clique reach each other over NVLink, across nodes too.

    ``health_mask`` is the fabric's health (the ``GPU_FABRIC_HEALTH_*`` fields); ``None`` when only
    the older call, which has no mask, was offered (drivers before R550)."""

    cluster_uuid: str  # canonical UUID text; NO_FABRIC_CLUSTER when in no multi-node fabric
    clique_id: int
    state: int
    status: int
    health_mask: int | None = None


@dataclass(frozen=True, kw_only=True)
class ProcessInfo:
    """One entry of ``nvmlDeviceGetComputeRunningProcesses`` / ``…GraphicsRunningProcesses``: the PID
    as the caller's PID namespace sees it, the GPU memory it holds (``None``: NVML does not know,
    as for a process in another container without the rights to see it), and the MIG instance it
    runs in (:data:`NO_INSTANCE` on a card without MIG)."""

    pid: int
    used_memory_bytes: int | None
    gpu_instance: int = NO_INSTANCE
    compute_instance: int = NO_INSTANCE


@dataclass(frozen=True, kw_only=True)
class ProcessUtilization:
    """One ``nvmlProcessUtilizationSample_t``: a process's share of the card's SMs and memory
    bandwidth, in percent, over the driver's sample period ending at ``timestamp_us``."""

    pid: int
    timestamp_us: int
    sm_percent: int
    memory_percent: int


@dataclass(frozen=True, kw_only=True)
class NvmlEvent:
    """``nvmlEventData_t``: the card (by PCI address), the event type bit, its data (the XID for
    an XID event) and the MIG instance the driver attributed it to (:data:`NO_INSTANCE`: none)."""

    address: str
    event_type: int
    data: int
    gpu_instance: int = NO_INSTANCE
    compute_instance: int = NO_INSTANCE


class NvmlEventSet(Protocol):
    """An ``nvmlEventSet_t`` with cards registered; read by one thread."""

    def wait(self, timeout_ms: int) -> NvmlEvent | None:
        """The next event, or ``None`` after ``timeout_ms`` without one (``NVML_ERROR_TIMEOUT``).

        Raises :class:`NvmlError`; ``GPU_IS_LOST`` names the card that fell off the bus."""
        ...

    def free(self) -> None: ...


class Nvml(Protocol):
    """NVML, one method per call. Thread-safe; initialised on first use, released by ``close``."""

    def driver_version(self) -> str: ...

    def cuda_driver_version(self) -> int: ...

    def name(self, address: str) -> str: ...

    def uuid(self, address: str) -> str: ...

    def memory_total_bytes(self, address: str) -> int: ...

    def cuda_compute_capability(self, address: str) -> tuple[int, int]: ...

    def architecture(self, address: str) -> int: ...

    def board_part_number(self, address: str) -> str: ...

    def power_limit_constraints_mw(self, address: str) -> tuple[int, int]: ...

    def power_limit_mw(self, address: str) -> int: ...

    def enforced_power_limit_mw(self, address: str) -> int: ...

    def mig_mode(self, address: str) -> tuple[int, int]:
        """(current, pending); ``NOT_SUPPORTED`` on a card without MIG."""
        ...

    def gpu_instance_profile_info(self, address: str, profile_index: int) -> GpuInstanceProfileInfo:
        """The profile of index ``0..17`` (``NVML_GPU_INSTANCE_PROFILE_*``)."""
        ...

    def gpu_instance_possible_placements(self, address: str, profile_id: int) -> list[tuple[int, int]]:
        """(start, size) in memory slices for the profile ID."""
        ...

    def retired_pages_pending(self, address: str) -> bool: ...

    def remapped_rows(self, address: str) -> RemappedRows: ...

    def clocks_event_reasons(self, address: str) -> int: ...

    def active_nvlinks(self, address: str) -> list[NvLink]:
        """The card's active NVLinks; ``NOT_SUPPORTED`` for a card without NVLink."""
        ...

    def gpu_fabric_info(self, address: str) -> GpuFabricInfo:
        """``nvmlDeviceGetGpuFabricInfoV`` (with the health mask), or the older
        ``nvmlDeviceGetGpuFabricInfo`` where the driver lacks it; ``NOT_SUPPORTED`` before Hopper."""
        ...

    # -- device preparation: what NodePrepare changes on a card ------------------------------------

    def minor_number(self, address: str) -> int:
        """The card's ``/dev/nvidia<N>``."""
        ...

    def running_processes(self, address: str) -> list[int]:
        """PIDs of compute and graphics processes on the card (empty: the card is idle)."""
        ...

    def processes(self, address: str) -> list[ProcessInfo]:
        """Compute and graphics processes on the card, one entry per PID and instance (the memory of
        a PID listed by both calls is counted once): on a card in MIG mode, with their GPU and
        compute instance."""
        ...

    def process_utilization(self, address: str, since_us: int) -> list[ProcessUtilization]:
        """``nvmlDeviceGetProcessUtilization``: the samples newer than ``since_us`` (0: all the
        driver keeps); empty when there are none (NVML's ``NOT_FOUND``); ``NOT_SUPPORTED`` on a card
        in MIG mode."""
        ...

    def total_energy_mj(self, address: str) -> int:
        """``nvmlDeviceGetTotalEnergyConsumption``: millijoules since the driver loaded (Volta+)."""
        ...

    def set_mig_mode(self, address: str, mode: int) -> None:
        """``nvmlDeviceSetMigMode``; ``IN_USE`` while processes or instances exist."""
        ...

    def compute_mode(self, address: str) -> int: ...

    def set_compute_mode(self, address: str, mode: int) -> None:
        """``nvmlDeviceSetComputeMode``: ``EXCLUSIVE_PROCESS`` while an MPS server owns the card."""
        ...

    def gpu_instances(self, address: str) -> list[GpuInstanceInfo]:
        """Every GPU instance of the card, of every profile."""
        ...

    def create_gpu_instance(self, address: str, *, profile_id: int, start: int, size: int) -> GpuInstanceInfo:
        """``nvmlDeviceCreateGpuInstanceWithPlacement``: exactly at ``start``, never elsewhere."""
        ...

    def destroy_gpu_instance(self, address: str, gpu_instance: int) -> None:
        """``IN_USE`` while it has compute instances; ``NOT_FOUND`` when it does not exist."""
        ...

    def compute_instances(self, address: str, gpu_instance: int) -> list[ComputeInstanceInfo]: ...

    def create_compute_instance(self, address: str, gpu_instance: int) -> ComputeInstanceInfo:
        """The compute instance that spans the whole GPU instance (its largest CI profile)."""
        ...

    def destroy_compute_instance(self, address: str, gpu_instance: int, compute_instance: int) -> None: ...

    def mig_device_uuid(self, address: str, gpu_instance: int, compute_instance: int) -> str:
        """The ``MIG-…`` UUID of the MIG device a GPU/compute instance pair makes."""
        ...

    def open_events(self, addresses: Sequence[str], event_types: int) -> NvmlEventSet:
        """An event set with each card registered for ``event_types`` it supports
        (``nvmlEventSetCreate``, ``nvmlDeviceGetSupportedEventTypes``, ``nvmlDeviceRegisterEvents``)."""
        ...

    def close(self) -> None: ...


T = TypeVar("T")
_NOT_OFFERED: Final = frozenset(
    {NvmlReturn.NOT_SUPPORTED, NvmlReturn.FUNCTION_NOT_FOUND, NvmlReturn.NO_PERMISSION}
)


def if_offered(read: Callable[[], T]) -> T | None:
    """The value, or ``None`` when NVML says the query is not offered here (this card, driver or
    permission); any other error raises."""
    try:
        return read()
    except NvmlError as exc:
        if exc.code in _NOT_OFFERED:
            return None
        raise
