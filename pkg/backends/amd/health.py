"""Health of an AMD card from its RAS error counters, as a verdict and as events.

``amdgpu`` counts hardware errors per block in ``ras/<block>_err_count`` (``umc`` is the memory,
``gfx``, ``sdma``, ``mmhub``, ``xgmi_wafl``...): ``ue`` uncorrectable, ``ce`` corrected. They mean
what NVIDIA's ECC signals mean, so they end in the same verdicts, taints and conditions:

* any uncorrectable error: ``HardwareHealthy=False`` and a ``Fatal`` event (``NoExecute``): data
  on the card may be wrong and the driver needs a reset to trust it again;
* corrected errors rising: a ``Degraded`` event (``NoSchedule``) once :data:`CORRECTED_BURST` or
  more arrive between two polls (a failing memory row), otherwise ``Recoverable`` (recorded);
* a card whose folder is gone (fallen off the bus, unbound): ``Fatal`` ``GpuFallenOffBus``.

There is no event file to block on, so :class:`RasHealthEvents` polls the counters every
:data:`POLL_SECONDS` and reports what rose since the previous poll.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pkg.backends.amd.sysfs import RasCounts, card_folder, read_ras
from pkg.backends.backend import BackendError, CardVerdict
from pkg.backends.health_events import HealthEvent, Severity

REASON_HEALTHY: Final = "Healthy"
CORRECTED_BURST: Final = 10
POLL_SECONDS: Final = 5.0


def check_health(sysfs_root: Path, address: str) -> CardVerdict:
    folder = card_folder(sysfs_root, address)
    if not folder.is_dir():
        return CardVerdict.false("GpuFallenOffBus", f"{folder} is gone")
    try:
        counts = read_ras(folder)
    except (OSError, ValueError) as exc:
        return CardVerdict.unknown("HealthCheckFailed", f"RAS counters unreadable: {exc}")
    if bad := [c for c in counts if c.uncorrectable > 0]:
        blocks = ", ".join(f"{c.block} {c.uncorrectable}" for c in bad)
        return CardVerdict.false("UncorrectableError", f"uncorrectable RAS errors: {blocks}")
    return CardVerdict.true(REASON_HEALTHY)


def events_between(
    address: str, before: Sequence[RasCounts], after: Sequence[RasCounts]
) -> list[HealthEvent]:
    """The events of the counters that rose from ``before`` to ``after``."""
    old = {c.block: c for c in before}
    events = []
    for now in after:
        was = old.get(now.block, RasCounts(now.block, 0, 0))
        if (ue := now.uncorrectable - was.uncorrectable) > 0:
            events.append(
                _event(address, now.block, "UncorrectableError", Severity.FATAL, f"{ue} uncorrectable")
            )
        if (ce := now.correctable - was.correctable) > 0:
            severity = Severity.DEGRADED if ce >= CORRECTED_BURST else Severity.RECOVERABLE
            reason = "CorrectedErrorBurst" if severity is Severity.DEGRADED else "CorrectedError"
            events.append(_event(address, now.block, reason, severity, f"{ce} corrected"))
    return events


def _event(address: str, block: str, reason: str, severity: Severity, what: str) -> HealthEvent:
    return HealthEvent(
        address=address, reason=reason, severity=severity, message=f"{what} error(s) in RAS block {block}"
    )


class RasHealthEvents:
    """Polls the RAS counters of ``addresses``; the first wait takes the baseline."""

    def __init__(
        self, sysfs_root: Path, addresses: Sequence[str], *, poll_seconds: float = POLL_SECONDS
    ) -> None:
        self._root = sysfs_root
        self._addresses = tuple(addresses)
        self._poll = poll_seconds
        self._last: dict[str, tuple[RasCounts, ...]] | None = None
        self._gone: set[str] = set()
        self._closed = threading.Event()

    def wait(self, timeout: float) -> Sequence[HealthEvent]:
        if self._last is None:
            self._last = {a: self._read(a) or () for a in self._addresses}
        if self._closed.wait(min(timeout, self._poll)):
            return []
        events: list[HealthEvent] = []
        for address in self._addresses:
            now = self._read(address)
            if now is None:
                if address not in self._gone:
                    self._gone.add(address)
                    events.append(
                        HealthEvent(
                            address=address,
                            reason="GpuFallenOffBus",
                            severity=Severity.FATAL,
                            message="the card's sysfs folder is gone",
                        )
                    )
                continue
            self._gone.discard(address)
            events += events_between(address, self._last.get(address, ()), now)
            self._last[address] = now
        return events

    def close(self) -> None:
        self._closed.set()

    def _read(self, address: str) -> tuple[RasCounts, ...] | None:
        folder = card_folder(self._root, address)
        if not folder.is_dir():
            return None
        try:
            return read_ras(folder)
        except (OSError, ValueError) as exc:
            raise BackendError(address=address, reason="HealthCheckFailed", message=str(exc)) from exc
