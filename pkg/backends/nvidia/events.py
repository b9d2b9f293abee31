"""NVML's event set as a :class:`~pkg.backends.health_events.HealthEventSource`, and the table of
what each event means for the card.

Which events: XID critical errors, double-bit ECC errors, single-bit ECC storms, DRAM retirement
(and its failure), poison errors and "GPU unavailable" — the event types nvml.h documents as
health signals. Clock, P-state and power-source events say nothing about health and are not
registered. A wait that answers ``GPU_IS_LOST`` is an event too (the card fell off the bus).

Severity of an XID, after NVIDIA's XID catalog (the "resolution" column: restart the application,
reset the GPU, or take the node out of service):

======================================  =============  ==========================================
XIDs                                    severity       why
======================================  =============  ==========================================
13, 31, 43, 45, 68, 69, 109             Recoverable    the application's own fault (illegal
                                                       address, graphics exception, context
                                                       timeout); the card is fine
63, 92, 94, 154                         Degraded       a row remap / page retirement is pending,
                                                       ECC errors repeat, or an error was
                                                       contained to one context: the card keeps
                                                       running work but needs a reset soon
48, 62, 64, 74, 79, 95, 119, 120, 140   Fatal          double-bit ECC, uncontained ECC, row
                                                       remapping failure, NVLink error, fallen
                                                       off the bus, GSP/firmware errors: the card
                                                       cannot be trusted until it is reset
any other XID                           Degraded       unknown to this table: keep new work away,
                                                       leave running work alone
======================================  =============  ==========================================

Other event types: double-bit ECC, DRAM retirement failure, fatal poison and GPU unavailable are
Fatal; single-bit ECC storms, DRAM retirement and non-fatal poison are Degraded; a single-bit ECC
error is corrected by the hardware and Recoverable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pkg.backends.errors import BackendError
from pkg.backends.health_events import HealthEvent, Severity
from pkg.backends.nvidia.nvml_port import (
    EVENT_DOUBLE_BIT_ECC,
    EVENT_DRAM_RETIREMENT,
    EVENT_DRAM_RETIREMENT_FAILURE,
    EVENT_FATAL_POISON,
    EVENT_GPU_UNAVAILABLE,
    EVENT_NON_FATAL_POISON,
    EVENT_SINGLE_BIT_ECC,
    EVENT_SINGLE_BIT_ECC_STORM,
    EVENT_XID_CRITICAL,
    NO_INSTANCE,
    Nvml,
    NvmlError,
    NvmlEvent,
    NvmlEventSet,
    NvmlReturn,
)

HEALTH_EVENT_TYPES: Final = (
    EVENT_SINGLE_BIT_ECC
    | EVENT_DOUBLE_BIT_ECC
    | EVENT_XID_CRITICAL
    | EVENT_SINGLE_BIT_ECC_STORM
    | EVENT_DRAM_RETIREMENT
    | EVENT_DRAM_RETIREMENT_FAILURE
    | EVENT_NON_FATAL_POISON
    | EVENT_FATAL_POISON
    | EVENT_GPU_UNAVAILABLE
)

# XID → (severity, short name for the reason). Names follow the catalog's descriptions.
XIDS: Final[dict[int, tuple[Severity, str]]] = {
    13: (Severity.RECOVERABLE, "GraphicsEngineException"),
    31: (Severity.RECOVERABLE, "MemoryPageFault"),
    43: (Severity.RECOVERABLE, "GpuStoppedProcessing"),
    45: (Severity.RECOVERABLE, "PreemptiveCleanup"),
    68: (Severity.RECOVERABLE, "VideoDecoderException"),
    69: (Severity.RECOVERABLE, "GraphicsEngineClassError"),
    109: (Severity.RECOVERABLE, "ContextSwitchTimeout"),
    63: (Severity.DEGRADED, "RowRemappingPending"),
    92: (Severity.DEGRADED, "HighSingleBitEccRate"),
    94: (Severity.DEGRADED, "ContainedEccError"),
    154: (Severity.DEGRADED, "RecoveryActionChanged"),
    48: (Severity.FATAL, "DoubleBitEccError"),
    62: (Severity.FATAL, "InternalMicroControllerHalt"),
    64: (Severity.FATAL, "RowRemappingFailure"),
    74: (Severity.FATAL, "NvlinkError"),
    79: (Severity.FATAL, "GpuFallenOffBus"),
    95: (Severity.FATAL, "UncontainedEccError"),
    119: (Severity.FATAL, "GspRpcTimeout"),
    120: (Severity.FATAL, "GspError"),
    140: (Severity.FATAL, "UnrecoveredEccError"),
}

EVENT_TYPES: Final[dict[int, tuple[Severity, str]]] = {
    EVENT_SINGLE_BIT_ECC: (Severity.RECOVERABLE, "SingleBitEccError"),
    EVENT_DOUBLE_BIT_ECC: (Severity.FATAL, "DoubleBitEccError"),
    EVENT_SINGLE_BIT_ECC_STORM: (Severity.DEGRADED, "SingleBitEccStorm"),
    EVENT_DRAM_RETIREMENT: (Severity.DEGRADED, "DramRetirement"),
    EVENT_DRAM_RETIREMENT_FAILURE: (Severity.FATAL, "DramRetirementFailure"),
    EVENT_NON_FATAL_POISON: (Severity.DEGRADED, "NonFatalPoisonError"),
    EVENT_FATAL_POISON: (Severity.FATAL, "FatalPoisonError"),
    EVENT_GPU_UNAVAILABLE: (Severity.FATAL, "GpuUnavailable"),
}


def xid_severity(xid: int) -> tuple[Severity, str]:
    """The severity and reason of an XID: ``Xid<n><Name>``, ``Xid<n>`` when not in the table."""
    severity, name = XIDS.get(xid, (Severity.DEGRADED, ""))
    return severity, f"Xid{xid}{name}"


def health_event(event: NvmlEvent) -> HealthEvent:
    """What one NVML event means for its card."""
    instance = None if event.gpu_instance == NO_INSTANCE else event.gpu_instance
    where = f" (GPU instance {instance})" if instance is not None else ""
    if event.event_type == EVENT_XID_CRITICAL:
        severity, reason = xid_severity(event.data)
        message = f"XID {event.data} on {event.address}{where}"
    else:
        unknown = (Severity.DEGRADED, f"NvmlEvent{event.event_type:x}")
        severity, reason = EVENT_TYPES.get(event.event_type, unknown)
        message = f"NVML event 0x{event.event_type:x} on {event.address}{where}"
    return HealthEvent(
        address=event.address, reason=reason, severity=severity, message=message, gpu_instance=instance
    )


class NvmlHealthEvents:
    """The health events of ``addresses`` through one NVML event set; one reader thread."""

    def __init__(self, nvml: Nvml, addresses: Sequence[str]) -> None:
        self._nvml = nvml
        self._addresses = tuple(addresses)
        self._set: NvmlEventSet | None = None

    def wait(self, timeout: float) -> Sequence[HealthEvent]:
        event_set = self._opened()
        try:
            first = event_set.wait(max(1, int(timeout * 1000)))
        except NvmlError as exc:
            if exc.code == NvmlReturn.GPU_IS_LOST and exc.address is not None:
                return [_lost(exc.address, str(exc))]
            self.close()  # a broken set is opened again on the next wait
            raise BackendError(address=exc.address or "node", reason=exc.reason, message=str(exc)) from exc
        return () if first is None else [health_event(first)]

    def close(self) -> None:
        if self._set is not None:
            self._set.free()
            self._set = None

    def _opened(self) -> NvmlEventSet:
        if self._set is None:
            try:
                self._set = self._nvml.open_events(self._addresses, HEALTH_EVENT_TYPES)
            except NvmlError as exc:
                raise BackendError(
                    address=exc.address or "node", reason=exc.reason, message=str(exc)
                ) from exc
        return self._set


def _lost(address: str, message: str) -> HealthEvent:
    return HealthEvent(address=address, reason="GpuLost", severity=Severity.FATAL, message=message)
