"""The one clock of the framework: monotonic time for durations, UTC wall time for what is written.

Everything that measures or waits (the workqueue's delays, the leader elector's lease expiry) reads
:meth:`Clock.monotonic`, which never jumps with the wall clock; everything written into an object
(a lease's renewTime, a condition's lastTransitionTime) reads :meth:`Clock.now`. :meth:`Clock.wait`
waits on a condition variable for a span of *this clock's* time, so a test clock can make a
delayed item due without sleeping. Tests pass a fake; production uses :data:`SYSTEM_CLOCK`.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward."""
        ...

    def now(self) -> datetime:
        """The current wall time, timezone-aware UTC."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Waits on ``cond`` (held by the caller) until notified or ``timeout`` seconds pass."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic``, ``datetime.now(UTC)`` and ``Condition.wait``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)


SYSTEM_CLOCK = SystemClock()


__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]
