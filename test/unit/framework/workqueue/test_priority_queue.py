"""PriorityQueue: priority then FIFO, de-duplication that keeps the highest priority, one worker per
item, delayed items ready by time, retries that keep their priority, rate limiting, shut-down,
and the workqueue metrics under their usual names."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from pkg.framework.metrics import MetricsProvider
from pkg.framework.workqueue.priority import DEFAULT_PRIORITY, LOW_PRIORITY, PriorityQueue
from pkg.framework.workqueue.queue import ShutDownError
from pkg.framework.workqueue.ratelimiter import ItemExponentialFailureRateLimiter, RateLimiter

METRICS = MetricsProvider(namespace="gpu")
WAIT = 2.0


class ManualClock:
    """Time that moves only on :meth:`step`, which wakes the delay timer to look at it again.

    Tests need no "has the timer acted yet" check: the timer moves every due item in one pass
    under the queue's lock, so a ``get`` that returns after a step sees all of them or none.
    """

    def __init__(self) -> None:
        self.t = 0.0
        self._conds: list[threading.Condition] = []
        self._read = threading.local()  # the time each thread last read

    def monotonic(self) -> float:
        self._read.t = self.t
        return self.t

    def now(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self.t)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if cond not in self._conds:
            self._conds.append(cond)
        if getattr(self._read, "t", None) != self.t:
            return  # a step came between reading the time and waiting: look again
        cond.wait(WAIT)  # bounded only so that a broken test cannot hang

    def step(self, seconds: float) -> None:
        self.t += seconds
        for cond in self._conds:
            with cond:
                cond.notify_all()


def new_queue(
    name: str, *, clock: ManualClock | None = None, rate_limiter: RateLimiter[str] | None = None
) -> PriorityQueue[str]:
    return PriorityQueue(name=name, metrics=METRICS, clock=clock, rate_limiter=rate_limiter)


def drain(queue: PriorityQueue[str]) -> list[str]:
    """Gets every waiting item, marking each done right away."""
    out = []
    while len(queue):
        item = queue.get()
        queue.done(item)
        out.append(item)
    return out


def test_higher_priority_first_then_fifo() -> None:
    queue = new_queue("pq-order")
    for item in ("listed-1", "listed-2", "listed-3"):
        queue.add(item, priority=LOW_PRIORITY)
    queue.add("changed-1")
    queue.add("urgent", priority=10)
    queue.add("changed-2", priority=DEFAULT_PRIORITY)
    assert drain(queue) == ["urgent", "changed-1", "changed-2", "listed-1", "listed-2", "listed-3"]


def test_a_waiting_item_keeps_its_highest_priority_and_its_place() -> None:
    queue = new_queue("pq-dedup")
    queue.add("a", priority=LOW_PRIORITY)
    queue.add("b", priority=LOW_PRIORITY)
    queue.add("c")
    queue.add("b")  # raised: ahead of the low ones, and ahead of c, which came after it
    queue.add("c", priority=LOW_PRIORITY)  # a lower priority never lowers it
    assert len(queue) == 3
    assert drain(queue) == ["b", "c", "a"]


def test_a_duplicate_is_not_counted_as_an_add() -> None:
    queue = new_queue("pq-adds")
    queue.add("a", priority=LOW_PRIORITY)
    queue.add("a")
    queue.add("a", priority=LOW_PRIORITY)
    labels = {"name": "pq-adds"}
    assert METRICS.registry.get_sample_value("gpu_workqueue_adds_total", labels) == 1
    assert METRICS.registry.get_sample_value("gpu_workqueue_depth", labels) == 1


def test_an_item_being_processed_is_not_handed_out_again_until_done() -> None:
    queue = new_queue("pq-processing")
    queue.add("a", priority=LOW_PRIORITY)
    queue.add("b", priority=LOW_PRIORITY)
    assert queue.get() == "a"
    queue.add("a", priority=LOW_PRIORITY)  # changed while being processed
    queue.add("a")  # ...and raised
    assert len(queue) == 1  # only b waits
    assert queue.get() == "b"
    assert len(queue) == 0
    queue.done("a")  # back, with the raised priority, ahead of a later low item
    queue.add("c", priority=LOW_PRIORITY)
    assert queue.get() == "a"
    assert queue.get() == "c"


def test_two_workers_never_hold_one_item() -> None:
    queue = new_queue("pq-workers")
    queue.add("a")
    held = queue.get()
    got: list[str] = []
    second = threading.Thread(target=lambda: got.append(queue.get()), daemon=True)
    second.start()
    queue.add("a")  # waits for done, so the second worker keeps waiting
    second.join(0.05)
    assert second.is_alive()
    assert got == []
    queue.done(held)
    second.join(WAIT)
    assert got == ["a"]


def test_delayed_items_become_ready_by_time() -> None:
    clock = ManualClock()
    queue = new_queue("pq-delay", clock=clock)
    queue.add_after("late", 10, priority=10)
    queue.add_after("soon", 5, priority=LOW_PRIORITY)
    clock.step(5)
    assert queue.get() == "soon"  # due; the urgent one is not yet
    assert len(queue) == 0
    clock.step(5)
    assert queue.get() == "late"
    queue.shut_down()


def test_items_due_together_come_out_by_priority() -> None:
    clock = ManualClock()
    queue = new_queue("pq-due", clock=clock)
    queue.add_after("resync", 1, priority=LOW_PRIORITY)
    queue.add_after("retry", 2)
    clock.step(3)
    assert queue.get() == "retry"
    assert queue.get() == "resync"
    queue.shut_down()


def test_a_delayed_item_keeps_the_highest_priority_it_was_delayed_with() -> None:
    clock = ManualClock()
    queue = new_queue("pq-delay-max", clock=clock)
    queue.add_after("b", 1, priority=LOW_PRIORITY)
    queue.add_after("a", 5)
    queue.add_after("a", 1, priority=LOW_PRIORITY)  # earlier, lower: the time moves, the priority not
    clock.step(1)
    assert queue.get() == "a"
    assert queue.get() == "b"
    queue.shut_down()


def test_a_retry_keeps_the_priority_it_was_handed_out_with() -> None:
    queue = new_queue("pq-retain")
    queue.add("resync", priority=LOW_PRIORITY)
    assert queue.get() == "resync"
    queue.add("other", priority=LOW_PRIORITY)
    queue.add_after("resync", 0)  # a failed resync: still low, so after what was queued meanwhile
    queue.done("resync")
    assert drain(queue) == ["other", "resync"]


def test_an_explicit_retry_priority_wins_over_the_kept_one() -> None:
    queue = new_queue("pq-retain-explicit")
    queue.add("a", priority=LOW_PRIORITY)
    assert queue.get() == "a"
    queue.add("other", priority=LOW_PRIORITY)
    queue.add_after("a", 0, priority=DEFAULT_PRIORITY)
    queue.done("a")
    assert drain(queue) == ["a", "other"]


def test_a_retry_after_done_gets_the_default_priority() -> None:
    queue = new_queue("pq-retain-forgotten")
    queue.add("a", priority=LOW_PRIORITY)
    queue.done(queue.get())
    queue.add("other", priority=LOW_PRIORITY)
    queue.add_after("a", 0)
    assert drain(queue) == ["a", "other"]


def test_rate_limited_retries_back_off_and_forget_resets() -> None:
    clock = ManualClock()
    limiter = ItemExponentialFailureRateLimiter[str](base=1.0, max_delay=100.0)
    queue = new_queue("pq-rate", clock=clock, rate_limiter=limiter)
    queue.add_rate_limited("a")  # 1 s
    queue.add_after("marker", 1)
    clock.step(1)
    assert {queue.get(), queue.get()} == {"a", "marker"}
    queue.done("a")
    queue.done("marker")
    queue.add_rate_limited("a")  # 2 s: not due when the marker is
    queue.add_after("marker", 1)
    clock.step(1)
    assert queue.get() == "marker"
    assert len(queue) == 0
    clock.step(1)
    assert queue.get() == "a"
    assert queue.num_requeues("a") == 2
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    labels = {"name": "pq-rate"}
    assert METRICS.registry.get_sample_value("gpu_workqueue_retries_total", labels) == 4
    queue.shut_down()


def test_shut_down_hands_out_what_is_queued_then_raises_and_ignores_adds() -> None:
    queue = new_queue("pq-shutdown")
    queue.add("low", priority=LOW_PRIORITY)
    queue.add("high")
    queue.shut_down()
    queue.add("late")
    queue.add_after("later", 0)
    assert queue.get() == "high"
    assert queue.get() == "low"
    with pytest.raises(ShutDownError):
        queue.get()


def test_shut_down_wakes_a_blocked_getter() -> None:
    queue = new_queue("pq-wake")
    errors: list[Exception] = []

    def get() -> None:
        try:
            queue.get()
        except ShutDownError as exc:
            errors.append(exc)

    getter = threading.Thread(target=get, daemon=True)
    getter.start()
    queue.shut_down()
    getter.join(WAIT)
    assert not getter.is_alive()
    assert len(errors) == 1
