"""The node's health verdicts: events and probe results in, one :class:`CardHealth` per card out.

Rules, per card (by PCI address):

* a ``Degraded`` or ``Fatal`` event starts (or worsens) an *episode*: the card is in that state
  with the event's reason. A later event of lower or equal severity extends the episode (its quiet
  period starts again) without changing the verdict; a worse one escalates it. ``Recoverable``
  events never start an episode (they are the application's fault) but are counted and reported;
* an episode ends when no event came for ``quiet_period`` seconds **and** a probe taken after that
  passed (``HardwareHealthy`` would be True): the events stopped and the card answers well;
* outside an episode, a probe that finds a fault (``False``) makes the card ``Degraded`` with the
  probe's reason; a probe that could not run (``Unknown``) is not a fault and taints nothing.

Beside the verdicts the tracker keeps the node's fabric faults (``fabric``,
:class:`~pkg.gpuhandler.health.fabric.FabricFaults`): they taint offers too, but are no verdict.

Every change of state or reason is passed to the subscribers (the publisher, the enrichment, the
kubelet stream, the reporting) with the previous and the new verdict. Subscribers run on the
caller's thread outside the lock and must not block. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pkg.backends.backend import CardVerdict, VerdictStatus
from pkg.backends.health_events import HealthEvent, Severity
from pkg.gpuhandler.health.fabric import FabricFaults
from pkg.gpuhandler.health.verdict import CardHealth, HealthLevel

logger = logging.getLogger(__name__)

Subscriber = Callable[[str, CardHealth, CardHealth], None]
"""Called with the card's PCI address, the previous verdict and the new one."""

_HEALTHY_REASON = "Healthy"


@dataclass
class _Episode:
    event: HealthEvent
    last_event: float  # monotonic time of the newest event of the episode
    since: datetime


@dataclass
class _Card:
    episode: _Episode | None = None
    probe: CardVerdict | None = None
    probed_at: float = 0.0  # monotonic
    verdict: CardHealth | None = None


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)  # the API keeps seconds


class HealthTracker:
    def __init__(
        self,
        *,
        quiet_period: float,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _now,
    ) -> None:
        if quiet_period < 0:
            raise ValueError(f"quiet_period must be >= 0, got {quiet_period}")
        self.quiet_period = quiet_period
        self._clock = clock
        self._now = now
        self._lock = threading.Lock()
        self._cards: dict[str, _Card] = {}
        self._subscribers: list[Subscriber] = []
        self._event_subscribers: list[Callable[[HealthEvent], None]] = []
        self.fabric = FabricFaults(now=now)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def subscribe_events(self, subscriber: Callable[[HealthEvent], None]) -> None:
        """Every event as it is recorded, recoverable ones included (reporting)."""
        self._event_subscribers.append(subscriber)

    def record(self, event: HealthEvent) -> None:
        """One event from the backend."""
        with self._lock:
            card = self._cards.setdefault(event.address, _Card())
            if event.severity is not Severity.RECOVERABLE:
                now = self._clock()
                episode = card.episode
                if episode is None or event.severity.rank > episode.event.severity.rank:
                    card.episode = _Episode(event=event, last_event=now, since=self._now())
                else:
                    episode.last_event = now
            change = self._update(event.address, card)
        for subscriber in self._event_subscribers:
            subscriber(event)
        self._notify(change)

    def probe(self, address: str, verdict: CardVerdict) -> CardHealth:
        """A probe result for the card (the enrichment's or the monitor's); returns the verdict."""
        with self._lock:
            card = self._cards.setdefault(address, _Card())
            card.probe, card.probed_at = verdict, self._clock()
            episode = card.episode
            if (
                episode is not None
                and verdict.status is VerdictStatus.TRUE
                and card.probed_at - episode.last_event >= self.quiet_period
            ):
                logger.info(
                    "card recovered: no health event for the quiet period and the probe passes",
                    extra={"pci_address": address, "event": episode.event.reason},
                )
                card.episode = None
            change = self._update(address, card)
            result = card.verdict
        self._notify(change)
        assert result is not None
        return result

    def recovering(self) -> list[str]:
        """Cards in an episode whose quiet period is over: the monitor probes them."""
        now = self._clock()
        with self._lock:
            return sorted(
                address
                for address, card in self._cards.items()
                if card.episode is not None and now - card.episode.last_event >= self.quiet_period
            )

    def verdict(self, address: str) -> CardHealth | None:
        """The card's verdict; ``None`` before any event or probe."""
        with self._lock:
            card = self._cards.get(address)
            return card.verdict if card is not None else None

    def verdicts(self) -> dict[str, CardHealth]:
        with self._lock:
            return {a: c.verdict for a, c in self._cards.items() if c.verdict is not None}

    def _update(self, address: str, card: _Card) -> tuple[str, CardHealth, CardHealth] | None:
        new = self._judge(card)
        old = card.verdict
        if new.same_as(old):
            assert old is not None
            card.verdict = CardHealth(
                level=old.level, reason=old.reason, message=new.message, since=old.since
            )
            return None
        card.verdict = new
        previous = old or CardHealth(
            level=HealthLevel.HEALTHY, reason=_HEALTHY_REASON, message="", since=new.since
        )
        return (address, previous, new) if not (old is None and new.healthy) else None

    def _judge(self, card: _Card) -> CardHealth:
        if card.episode is not None:
            event = card.episode.event
            return CardHealth(
                level=HealthLevel.of(event.severity),
                reason=event.reason,
                message=event.message,
                since=card.episode.since,
            )
        probe = card.probe
        if probe is not None and probe.status is VerdictStatus.FALSE:
            since = (
                card.verdict.since if card.verdict and card.verdict.reason == probe.reason else self._now()
            )
            return CardHealth(
                level=HealthLevel.DEGRADED, reason=probe.reason, message=probe.message, since=since
            )
        return CardHealth(
            level=HealthLevel.HEALTHY,
            reason=probe.reason if probe is not None else _HEALTHY_REASON,
            message=probe.message if probe is not None else "",
            since=self._now(),
        )

    def _notify(self, change: tuple[str, CardHealth, CardHealth] | None) -> None:
        if change is None:
            return
        for subscriber in self._subscribers:
            try:
                subscriber(*change)
            except Exception:  # one broken subscriber must not stop the others
                logger.exception("health subscriber failed", extra={"pci_address": change[0]})
