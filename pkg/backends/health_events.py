"""Health events: what a vendor library reports the moment a card fails, and how bad it is.

The probe behind ``HardwareHealthy`` (:meth:`~pkg.backends.backend.VendorBackend.health`) answers
"is the card healthy now" when asked; events answer "what just went wrong" as it happens, which
is what lets the gpu-handler taint a card's offers seconds after an XID instead of at the next
enrichment pass. A backend turns its library's events into :class:`HealthEvent` with a
:class:`Severity` from a documented table (NVIDIA: :mod:`pkg.backends.nvidia.events`), so the
components above decide what to do from the severity alone:

* ``Fatal``: the card cannot run work any more (fallen off the bus, uncorrectable memory error
  that needs a reset); running Pods must go (``NoExecute``);
* ``Degraded``: the card runs, but new work should go elsewhere (a reset is pending, errors
  repeat); running Pods stay (``NoSchedule``);
* ``Recoverable``: the fault belonged to one application (its own illegal address, a timeout of
  its context) and the card is fine; recorded and counted, never tainted.

A source is read by one thread (the gpu-handler's health monitor); :meth:`HealthEventSource.wait`
blocks at most ``timeout`` seconds so that thread can stop promptly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Severity(StrEnum):
    FATAL = "Fatal"
    DEGRADED = "Degraded"
    RECOVERABLE = "Recoverable"

    @property
    def rank(self) -> int:
        """Worse is higher: a fatal event outranks a degraded one still in force."""
        return {Severity.RECOVERABLE: 0, Severity.DEGRADED: 1, Severity.FATAL: 2}[self]


@dataclass(frozen=True, kw_only=True)
class HealthEvent:
    """One event on one card.

    ``reason`` is a CamelCase word (``Xid79GpuFallenOffBus``, ``DoubleBitEccError``) that becomes
    the taint's value and the condition's reason, so it is at most 63 characters of ``[A-Za-z0-9]``.
    ``gpu_instance`` names the MIG GPU instance the library attributed the event to, if any.
    """

    address: str
    reason: str
    severity: Severity
    message: str
    gpu_instance: int | None = None


class HealthEventSource(Protocol):
    """The events of a set of cards, as a backend's library delivers them."""

    def wait(self, timeout: float) -> Sequence[HealthEvent]:
        """The events that arrived, waiting up to ``timeout`` seconds for the first; may be empty.

        Raises :class:`~pkg.backends.backend.BackendError` when the library cannot deliver events
        (the monitor retries with backoff)."""
        ...

    def close(self) -> None: ...
