"""``HardwareHealthy`` of an NVIDIA card, from what NVML says simply.

Health is a short list of signals that mean "do not give this card to new work" and that NVML
reports without interpretation (XID streams and ECC counters need history and belong to DCGM):

* retired pages pending (``nvmlDeviceGetRetiredPagesPendingStatus``; pre-Ampere memory): a reset
  is needed before the retirement takes effect;
* row remapping failed (``nvmlDeviceGetRemappedRows``; Ampere and newer): the memory ran out of
  spare rows; or a remap is pending, which takes effect only after a GPU reset (an uncorrectable
  memory error was seen, so the card stays suspect until then);
* thermal slowdown (software or hardware bit of ``nvmlDeviceGetCurrentClocksEventReasons``);
* the GPU fell off the bus (any query answers ``GPU_IS_LOST``) or needs a reset (``RESET_REQUIRED``).

A check the card does not support (``NOT_SUPPORTED``) is skipped. A check that fails otherwise
makes the verdict ``Unknown`` unless another check already found a fault: a fault seen is a fault.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pkg.backends.backend import CardVerdict
from pkg.backends.nvidia.nvml_port import (
    CLOCKS_EVENT_HW_THERMAL,
    CLOCKS_EVENT_SW_THERMAL,
    Nvml,
    NvmlError,
    NvmlReturn,
)

REASON_HEALTHY: Final = "Healthy"
REASON_CHECK_FAILED: Final = "HealthCheckFailed"
_FATAL: Final = {NvmlReturn.GPU_IS_LOST: "GpuLost", NvmlReturn.RESET_REQUIRED: "ResetRequired"}


def _retired_pages(nvml: Nvml, address: str) -> tuple[str, str] | None:
    if nvml.retired_pages_pending(address):
        return "RetiredPagesPending", "retired memory pages are pending; the GPU needs a reset"
    return None


def _remapped_rows(nvml: Nvml, address: str) -> tuple[str, str] | None:
    rows = nvml.remapped_rows(address)
    if rows.failure:
        return (
            "RowRemappingFailed",
            f"row remapping failed ({rows.uncorrectable} uncorrectable rows remapped)",
        )
    if rows.pending:
        return "RowRemappingPending", "a row remap is pending; the GPU needs a reset"
    return None


def _thermal(nvml: Nvml, address: str) -> tuple[str, str] | None:
    reasons = nvml.clocks_event_reasons(address)
    if reasons & (CLOCKS_EVENT_SW_THERMAL | CLOCKS_EVENT_HW_THERMAL):
        kind = "hardware" if reasons & CLOCKS_EVENT_HW_THERMAL else "software"
        return "ThermalSlowdown", f"clocks are reduced by {kind} thermal slowdown"
    return None


CHECKS: Final[tuple[Callable[[Nvml, str], tuple[str, str] | None], ...]] = (
    _retired_pages,
    _remapped_rows,
    _thermal,
)


def check_health(nvml: Nvml, address: str) -> CardVerdict:
    """Runs every check on the card at ``address``; never raises for an NVML error."""
    faults: list[tuple[str, str]] = []
    failed: list[NvmlError] = []
    for check in CHECKS:
        try:
            fault = check(nvml, address)
        except NvmlError as exc:
            if exc.code in _FATAL:
                return CardVerdict.false(_FATAL[NvmlReturn(exc.code)], str(exc))
            if not exc.not_supported:
                failed.append(exc)
            continue
        if fault is not None:
            faults.append(fault)
    if faults:
        return CardVerdict.false(faults[0][0], "; ".join(message for _, message in faults))
    if failed:
        return CardVerdict.unknown(REASON_CHECK_FAILED, "; ".join(map(str, failed)))
    return CardVerdict.true(
        REASON_HEALTHY, "no pending page retirement, row remapping failure or thermal slowdown"
    )
