"""Selector verdicts made ahead of the first request that needs them, on the leader's own schedule.

An explanation judges every device of the cluster against its claim's selectors. The verdicts are
memoised per pool and shared by every claim of the same class, but best fit looks only at the
pools it needs, so without this the *first* explanation of a class made the pass over the other
pools itself: about a second more at 1,000 nodes x 8 H100, on the user's clock
(docs/allocator.md#explain-served-by-the-controller). :class:`SelectorWarmer` makes those passes
once the caches have synced, then every ``period`` for what changed since: a pool republished by
its driver is built anew, and a DeviceClass created later has no verdicts yet. A round where
nothing changed costs a few milliseconds (one lookup per class and pool).

Leader only: only the leader allocates and answers explanations, and a replica that is not
leading builds no pools. The passes run outside the decision lock (they read pools, which are
immutable apart from these memos) and are interrupted when the runnable is stopped.
"""

from __future__ import annotations

import logging
import threading
import time

from pkg.dra.allocator import Allocator
from pkg.dracontroller.internal.service.cache_reader import CacheReader

logger = logging.getLogger(__name__)

DEFAULT_WARM_PERIOD = 10.0


class SelectorWarmer:
    name = "selector-warmer"
    needs_leader_election = True

    def __init__(
        self, *, allocator: Allocator, cache_reader: CacheReader, period: float = DEFAULT_WARM_PERIOD
    ) -> None:
        self._allocator = allocator
        self._cache_reader = cache_reader
        self._period = period

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.warm(stop)
            stop.wait(self._period)

    def warm(self, stop: threading.Event) -> int:
        """One round: the passes made (0 when every class and pool was warm already)."""
        began = time.perf_counter()
        passes = self._allocator.warm_classes(
            self._cache_reader.slices(), self._cache_reader.classes(), stop=stop.is_set
        )
        if passes:
            logger.info(
                "made %d selector passes (class x pool) ahead of requests in %.2f s",
                passes,
                time.perf_counter() - began,
            )
        return passes
