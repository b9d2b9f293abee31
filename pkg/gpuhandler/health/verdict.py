"""The health verdict of one card, shared by the condition, the taints and the kubelet stream.

Three states, because Kubernetes has two taint effects to map onto: ``Degraded`` keeps new work
away (``NoSchedule``) and ``Fatal`` also removes running work (``NoExecute``). ``since`` is when
the card entered the state with this reason; it is the taint's ``timeAdded`` and so must not move
while the verdict stays (a moving ``timeAdded`` would rewrite the slices on every publish).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from pkg.backends.backend import CardVerdict
from pkg.backends.health_events import Severity


class HealthLevel(enum.StrEnum):
    """How bad a card's health is; its value is the ``state`` label of the transitions metric and the
    log field of that name, which keep their names."""

    HEALTHY = "Healthy"
    DEGRADED = "Degraded"
    FATAL = "Fatal"

    @classmethod
    def of(cls, severity: Severity) -> HealthLevel:
        return cls.FATAL if severity is Severity.FATAL else cls.DEGRADED


@dataclass(frozen=True, kw_only=True)
class CardHealth:
    level: HealthLevel
    reason: str
    message: str
    since: datetime

    @property
    def healthy(self) -> bool:
        return self.level is HealthLevel.HEALTHY

    def same_as(self, other: CardHealth | None) -> bool:
        """Equal in what the outside sees (the state, and the reason of a fault); the message, and
        the reason of a healthy card, may change freely."""
        return (
            other is not None and self.level is other.level and (self.healthy or self.reason == other.reason)
        )

    def as_verdict(self, probe: CardVerdict) -> CardVerdict:
        """``HardwareHealthy``: False with the event (or fault) as reason while unhealthy; the
        probe's own verdict (True, or Unknown when it could not run) while healthy."""
        if self.healthy:
            return probe
        return CardVerdict.false(self.reason, self.message)
