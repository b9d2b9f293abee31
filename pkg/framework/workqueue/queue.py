"""Work queues with client-go's ``util/workqueue`` semantics: plain, delaying, rate limiting.

The invariants, and the three pieces of state that keep them:

* ``dirty``: items that need processing. An item already dirty is not added again, so a burst of
  events about one object costs one reconcile (de-duplication).
* ``processing``: items handed out by :meth:`Queue.get` and not yet :meth:`Queue.done`. An item
  being processed is **never** put in the queue, so two workers never hold the same item at once.
* ``queue``: the FIFO of items that are dirty and not being processed.

An item added while it is processed is only marked dirty; :meth:`Queue.done` puts it back into
the queue, so the change that arrived mid-flight is seen by a later pass and never lost.

After :meth:`Queue.shut_down`, adds are ignored, :meth:`Queue.get` still hands out what is already
queued and then raises :class:`ShutDownError` (client-go's ``shutdown == true``), waking every
blocked getter. Callers who must stop promptly simply stop calling ``get``.

Concurrency: one lock guards all state; separate conditions on it wake getters (``_not_empty``)
and the delay timer (``_timer``), so a notification meant for one kind of waiter can never be
swallowed by another. :class:`DelayingQueue` keeps delayed items in a heap
served by one timer thread, started on the first delayed add and ended by shut-down: no thread
per item. Time comes from a :class:`~pkg.framework.clock.Clock` so tests can move it by hand.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from pkg.framework.clock import SYSTEM_CLOCK, Clock
from pkg.framework.metrics.provider import MetricsProvider
from pkg.framework.metrics.workqueue import QueueMetrics
from pkg.framework.workqueue.ratelimiter import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class ShutDownError(Exception):
    """Raised by :meth:`Queue.get` once the queue is shut down and empty."""


class Queue(Generic[T]):
    """A de-duplicating FIFO whose items are never processed by two workers at once."""

    def __init__(
        self, *, name: str, clock: Clock | None = None, metrics: MetricsProvider | None = None
    ) -> None:
        self.name = name
        self._clock: Clock = clock or SYSTEM_CLOCK
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: dict[T, float] = {}  # item -> when get handed it out
        self._added_at: dict[T, float] = {}  # item -> when it became dirty
        self._shutting_down = False
        self._metrics = QueueMetrics(name, provider=metrics or MetricsProvider())
        # Weak: a registry outlives every queue; it must not keep a discarded queue alive.
        ref = weakref.ref(self)
        self._metrics.observe_in_flight(
            unfinished=lambda: q._in_flight_seconds()[0] if (q := ref()) else 0.0,
            longest=lambda: q._in_flight_seconds()[1] if (q := ref()) else 0.0,
        )

    def add(self, item: T) -> None:
        """Marks ``item`` for processing; a no-op if it is already waiting or the queue is shut down."""
        with self._lock:
            self._add_locked(item)

    def get(self) -> T:
        """Blocks until an item is available and hands it out; raises :class:`ShutDownError` when
        the queue is shut down and empty. The caller must call :meth:`done` with the item."""
        with self._lock:
            while not self._queued_locked() and not self._shutting_down:
                self._not_empty.wait()
            if not self._queued_locked():
                raise ShutDownError(f"workqueue {self.name!r} is shut down")
            item = self._pop_locked()
            now = self._clock.monotonic()
            self._processing[item] = now
            self._dirty.discard(item)
            self._metrics.taken(queue_len=self._queued_locked(), waited=now - self._added_at.pop(item, now))
            return item

    def done(self, item: T) -> None:
        """Ends the processing of ``item``; requeues it if it was added again meanwhile."""
        with self._lock:
            started = self._processing.pop(item, None)
            if started is not None:
                self._metrics.finished(worked=self._clock.monotonic() - started)
            if item in self._dirty:
                self._push_locked(item)
                self._metrics.requeued(queue_len=self._queued_locked())
                self._not_empty.notify()

    def __len__(self) -> int:
        """Items waiting in the queue (not those being processed)."""
        with self._lock:
            return self._queued_locked()

    def shut_down(self) -> None:
        """Stops accepting items and wakes every waiter."""
        with self._lock:
            self._shut_down_locked()

    def _add_locked(self, item: T) -> None:
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        self._added_at.setdefault(item, self._clock.monotonic())
        # An item being processed is not queued: done() queues it, so no second worker gets it meanwhile.
        if item not in self._processing:
            self._push_locked(item)
            self._not_empty.notify()
        self._metrics.added(queue_len=self._queued_locked())

    # The order in which waiting items are handed out: FIFO here; the priority queue overrides these
    # three, and only these, so both share every other invariant above.

    def _push_locked(self, item: T) -> None:
        self._queue.append(item)

    def _pop_locked(self) -> T:
        return self._queue.popleft()

    def _queued_locked(self) -> int:
        return len(self._queue)

    def _shut_down_locked(self) -> None:
        self._shutting_down = True
        self._not_empty.notify_all()

    def _in_flight_seconds(self) -> tuple[float, float]:
        """(summed, longest) age of the items being processed."""
        with self._lock:
            now = self._clock.monotonic()
            ages = [now - started for started in self._processing.values()]
        return sum(ages), max(ages, default=0.0)


class DelayingQueue(Queue[T]):
    """A :class:`Queue` that can also add an item after a delay."""

    def __init__(
        self, *, name: str, clock: Clock | None = None, metrics: MetricsProvider | None = None
    ) -> None:
        super().__init__(name=name, clock=clock, metrics=metrics)
        self._timer = threading.Condition(self._lock)
        # Heap entries are (ready_at, seq, item); seq breaks ties so items are never compared.
        # _waiting holds each item's live entry: re-scheduling an item earlier leaves its old entry
        # in the heap, recognised as stale when popped (lazy deletion keeps add_after O(log n)).
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._timer_thread: threading.Thread | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Adds ``item`` once ``delay`` seconds have passed. An item already waiting keeps the
        earlier of its two ready times, so repeated retries never push an item further out."""
        with self._lock:
            self._add_after_locked(item, delay)

    def _add_after_locked(self, item: T, delay: float) -> None:
        if self._shutting_down:
            return
        self._metrics.retried()
        if delay <= 0:
            self._add_ready_locked(item)
            return
        ready_at = self._clock.monotonic() + delay
        known = self._waiting.get(item)
        if known is not None and known[0] <= ready_at:
            return
        seq = next(self._seq)
        self._waiting[item] = (ready_at, seq)
        heapq.heappush(self._heap, (ready_at, seq, item))
        if self._timer_thread is None:
            self._timer_thread = threading.Thread(
                target=self._run_timer, name=f"workqueue-{self.name}-timer", daemon=True
            )
            self._timer_thread.start()
        elif self._heap[0][1] == seq:
            self._timer.notify()  # the new item is due first: the timer must wait less

    def _add_ready_locked(self, item: T) -> None:
        """Adds an item whose delay is over (the priority queue adds it with its delayed priority)."""
        self._add_locked(item)

    def _shut_down_locked(self) -> None:
        super()._shut_down_locked()
        self._timer.notify_all()

    def _run_timer(self) -> None:
        with self._lock:
            while not self._shutting_down:
                now = self._clock.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    ready_at, seq, item = heapq.heappop(self._heap)
                    if self._waiting.get(item) == (ready_at, seq):
                        del self._waiting[item]
                        self._add_ready_locked(item)
                timeout = self._heap[0][0] - now if self._heap else None
                self._clock.wait(self._timer, timeout)


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`DelayingQueue` whose retries are spaced by a :class:`RateLimiter`."""

    def __init__(
        self,
        *,
        name: str,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock | None = None,
        metrics: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics=metrics)
        self._rate_limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter()

    def add_rate_limited(self, item: T) -> None:
        """Adds ``item`` after the delay its limiter assigns to one more failure."""
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Resets ``item``'s backoff: call it when the item was processed successfully."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._rate_limiter.num_requeues(item)


__all__ = [
    "DelayingQueue",
    "Queue",
    "RateLimitingQueue",
    "ShutDownError",
]
