"""One jitter rule for everything periodic: ``period`` scaled by a uniform factor in ``1 ± jitter``.

Periodic work of many processes started together (a DaemonSet rollout starts every node's agent
within seconds) would otherwise run in lockstep and hit the API server at once. The spread is
symmetric, so the mean period stays ``period``. Retries use their own backoff rules (the rate
limiters; client-go's ``retry_period * (1 + random() * 1.2)`` in leader election), not this.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Jitter:
    """A period and its relative jitter; :meth:`next` draws one delay. Immutable, so shareable."""

    period: float
    jitter: float = 0.2
    rand: Callable[[float, float], float] = field(default=random.uniform, compare=False)

    def __post_init__(self) -> None:
        if self.period <= 0 or not 0 <= self.jitter < 1:
            raise ValueError(
                f"need period > 0 and 0 <= jitter < 1, got period={self.period} jitter={self.jitter}"
            )

    def next(self) -> float:
        """One delay in ``[period * (1 - jitter), period * (1 + jitter)]``."""
        return self.period * self.rand(1 - self.jitter, 1 + self.jitter)


__all__ = ["Jitter"]
