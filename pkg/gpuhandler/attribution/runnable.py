"""The attribution loop: one pass per interval, published to the collector and the claims.

A pass that fails as a whole (the checkpoint cannot be read, a bug) is logged and counted, the last
good sample stays published, and the next pass comes after the interval doubled, up to eight
intervals, so a persistent failure neither spins nor goes silent.
"""

from __future__ import annotations

import logging
import threading

from pkg.domain.metrics import METRICS
from pkg.gpuhandler.attribution.metrics import AttributionCollector
from pkg.gpuhandler.attribution.sampler import Sampler
from pkg.gpuhandler.attribution.usage_feed import UsageFeed

logger = logging.getLogger(__name__)

passes = METRICS.counter(
    "attribution_passes_total", "Attribution passes, by result (ok, failed).", labelnames=["result"]
)
pass_seconds = METRICS.histogram(
    "attribution_pass_duration_seconds",
    "Time of one attribution pass: every card read once, PIDs mapped, claims joined.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
_MAX_BACKOFF_FACTOR = 8


class AttributionLoop:
    name = "attribution"
    needs_leader_election = False  # one handler per node, reading its own cards

    def __init__(
        self,
        *,
        sampler: Sampler,
        collector: AttributionCollector,
        writer: UsageFeed | None,
        interval: float,
    ) -> None:
        self._sampler = sampler
        self._collector = collector
        self._writer = writer
        self._interval = interval

    def run(self, stop: threading.Event) -> None:
        factor = 1
        while not stop.is_set():
            factor = 1 if self.step() else min(_MAX_BACKOFF_FACTOR, factor * 2)
            stop.wait(self._interval * factor)

    def step(self) -> bool:
        """One pass; ``False`` when it failed."""
        try:
            with pass_seconds.time():
                sample = self._sampler.sample()
            self._collector.publish(sample)
            if self._writer is not None:
                self._writer.write(sample)
        except Exception:
            passes.labels(result="failed").inc()
            logger.exception("attribution pass failed")
            return False
        passes.labels(result="ok").inc()
        return True
