"""Garbage-collector policy of the controller process, run on its own schedule.

The allocator knows when its pool cache has built many devices since the heap was last settled
(:meth:`~pkg.dra.allocator.Allocator.settle_heap`: collect once, then ``gc.freeze`` what is
live). Settling is a process concern, not part of a decision, so :class:`HeapSettler` asks for it
periodically from its own runnable instead of every allocation asking for it on its way out: a
large pool build (a restart, a leader change, many republished nodes) is settled within
``period``, and a decision never pays for a collection it did not need.
"""

from __future__ import annotations

import logging
import threading

from pkg.dra.allocator import Allocator

logger = logging.getLogger(__name__)

DEFAULT_SETTLE_PERIOD = 1.0


class HeapSettler:
    name = "heap-settler"
    needs_leader_election = False  # a replica that is not leading builds no pools: a no-op there

    def __init__(self, *, allocator: Allocator, period: float = DEFAULT_SETTLE_PERIOD) -> None:
        self._allocator = allocator
        self._period = period

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self._period):
            if self._allocator.settle_heap():
                logger.debug("settled the heap after a large pool build")
