"""A rate-limiting workqueue that hands out urgent items first (controller-runtime's ``priorityqueue``).

Why: a controller that starts (or takes over the lease) lists every object and queues each one;
an informer with a resync period queues every object again each period. In a FIFO, an object a
user created or changed a moment later waits behind all of them. Here every item carries a
priority (higher first); the enqueue path (:mod:`pkg.framework.controller.enqueue`) gives
:data:`LOW_PRIORITY` to events from the initial list and to updates whose resourceVersion did not
change (resyncs, a re-list finding an object as it was), and :data:`DEFAULT_PRIORITY` to everything
else, as controller-runtime does.

Ordering rules:

* higher priority first; equal priorities in the order they became ready (FIFO);
* an item added again while it waits keeps the *highest* priority it was added with, and its place
  among items of that priority (it is not sent to the back);
* a delayed item (``add_after``, ``add_rate_limited``) waits by time, then joins the ready items
  with the highest priority it was delayed with;
* a retry keeps the priority its failed pass was handed out with unless told otherwise, so a
  failing resync does not turn into urgent work (controller-runtime's "retain priority").

Everything else is :class:`~pkg.framework.workqueue.queue.RateLimitingQueue`'s, inherited rather
than repeated: the dirty and processing sets (one worker per item at a time, an item re-added
while processed comes back after ``done``), shut-down, rate limiting and the workqueue metrics
under the same names. This class only replaces how waiting items are ordered: a heap of
``(-priority, order, item)`` with lazy deletion (raising an item's priority pushes a new entry;
the old one is skipped when popped), so add and get stay O(log n).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import TypeVar

from pkg.framework.clock import Clock
from pkg.framework.metrics.provider import MetricsProvider
from pkg.framework.workqueue.queue import RateLimitingQueue
from pkg.framework.workqueue.ratelimiter import RateLimiter

T = TypeVar("T", bound=Hashable)

DEFAULT_PRIORITY = 0
"""An event about an object that is new or changed: what a user is waiting for."""

LOW_PRIORITY = -100
"""An event that reports nothing new: the initial list, a resync, an unchanged re-list."""


class PriorityQueue(RateLimitingQueue[T]):
    """A :class:`RateLimitingQueue` whose waiting items are handed out by priority, then FIFO."""

    def __init__(
        self,
        *,
        name: str,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock | None = None,
        metrics: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name=name, rate_limiter=rate_limiter, clock=clock, metrics=metrics)
        self._ready: list[tuple[int, int, T]] = []  # (-priority, order, item): a min-heap
        self._entries: dict[T, tuple[int, int]] = {}  # each waiting item's live heap entry
        self._priority: dict[T, int] = {}  # each dirty item's priority
        self._delayed_priority: dict[T, int] = {}  # what a delayed item will be added with
        self._in_hand: dict[T, int] = {}  # the priority each item being processed was handed out with
        self._order = itertools.count()

    def add(self, item: T, *, priority: int = DEFAULT_PRIORITY) -> None:
        """Marks ``item`` for processing with ``priority``; an item already waiting is not added
        twice but takes the higher of its two priorities."""
        with self._lock:
            self._add_with_priority_locked(item, priority)

    def add_after(self, item: T, delay: float, *, priority: int | None = None) -> None:
        """Adds ``item`` once ``delay`` seconds have passed, with ``priority`` (by default the one
        it is being processed with, else :data:`DEFAULT_PRIORITY`)."""
        with self._lock:
            if self._shutting_down:
                return
            chosen = priority if priority is not None else self._in_hand.get(item, DEFAULT_PRIORITY)
            if delay <= 0:
                self._metrics.retried()
                self._add_with_priority_locked(item, chosen)
                return
            known = self._delayed_priority.get(item)
            self._delayed_priority[item] = chosen if known is None else max(known, chosen)
            self._add_after_locked(item, delay)

    def add_rate_limited(self, item: T, *, priority: int | None = None) -> None:
        """Adds ``item`` after its limiter's delay, with ``priority`` as in :meth:`add_after`."""
        self.add_after(item, self._rate_limiter.when(item), priority=priority)

    def done(self, item: T) -> None:
        with self._lock:
            # Before the base's done: until then the item is still being processed, so no other
            # worker can have been handed it and recorded its own priority under this key.
            self._in_hand.pop(item, None)
        super().done(item)

    def _add_with_priority_locked(self, item: T, priority: int) -> None:
        if self._shutting_down:
            return
        if item not in self._dirty:
            self._priority[item] = priority
            self._add_locked(item)
            return
        if priority <= self._priority[item]:
            return
        self._priority[item] = priority
        entry = self._entries.get(item)
        if entry is not None:  # waiting (not being processed): move it up, keeping its order
            self._entries[item] = (-priority, entry[1])
            heapq.heappush(self._ready, (-priority, entry[1], item))

    def _add_ready_locked(self, item: T) -> None:
        self._add_with_priority_locked(item, self._delayed_priority.pop(item, DEFAULT_PRIORITY))

    def _push_locked(self, item: T) -> None:
        entry = (-self._priority[item], next(self._order))
        self._entries[item] = entry
        heapq.heappush(self._ready, (*entry, item))

    def _pop_locked(self) -> T:
        while True:
            negated, order, item = heapq.heappop(self._ready)
            if self._entries.get(item) == (negated, order):
                del self._entries[item]
                del self._priority[item]
                self._in_hand[item] = -negated
                return item

    def _queued_locked(self) -> int:
        return len(self._entries)


__all__ = ["DEFAULT_PRIORITY", "LOW_PRIORITY", "PriorityQueue"]
