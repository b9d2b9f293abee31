"""Workqueue invariants: de-duplication, no concurrent processing, re-add while processing,
delayed adds in ready-time order, rate-limited retries, shut-down, metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from pkg.framework.metrics import MetricsProvider
from pkg.framework.workqueue.queue import DelayingQueue, Queue, RateLimitingQueue, ShutDownError
from pkg.framework.workqueue.ratelimiter import ItemExponentialFailureRateLimiter

# The framework is handed a provider; the tests hand it one named like the project's.
METRICS = MetricsProvider(namespace="gpu")
registry = METRICS.registry

WAIT = 2.0  # upper bound for event waits; tests normally finish far sooner


class FakeClock:
    """Time that moves only when told; ``step`` wakes whoever waits on it.

    ``settle(t)`` returns once a waiter has gone back to waiting after reading a time >= ``t``:
    the delay timer reads the time, moves due items, then waits, so by then it has acted on ``t``.
    """

    def __init__(self) -> None:
        self.t = 0.0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiters: set[threading.Condition] = set()
        self._seen: dict[int, float] = {}  # thread -> last time it read
        self._settled_at = -1.0

    def monotonic(self) -> float:
        with self._lock:
            self._seen[threading.get_ident()] = self.t
            return self.t

    def now(self) -> datetime:
        return datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=self.monotonic())

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        with self._lock:
            self._waiters.add(cond)
            self._settled_at = self._seen.get(threading.get_ident(), -1.0)
            self._changed.notify_all()
        cond.wait()

    def step(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds
            waiters = list(self._waiters)
        for cond in waiters:
            with cond:
                cond.notify_all()

    def settle(self, t: float | None = None) -> None:
        with self._lock:
            target = self.t if t is None else t
            assert self._changed.wait_for(lambda: self._settled_at >= target, WAIT)


def get_in_thread(queue: Queue[str]) -> tuple[threading.Thread, list[str | Exception]]:
    out: list[str | Exception] = []

    def run() -> None:
        try:
            out.append(queue.get())
        except ShutDownError as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@pytest.fixture
def queue() -> Iterator[Queue[str]]:
    q: Queue[str] = Queue(name="test-plain")
    yield q
    q.shut_down()


def test_fifo_and_deduplication(queue: Queue[str]) -> None:
    for item in ["a", "b", "a", "c", "b"]:
        queue.add(item)
    assert len(queue) == 3
    assert [queue.get(), queue.get(), queue.get()] == ["a", "b", "c"]
    assert len(queue) == 0


def test_item_added_while_processing_waits_for_done(queue: Queue[str]) -> None:
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not handed to a second worker while the first holds it
    thread, out = get_in_thread(queue)
    thread.join(0.05)
    assert out == []
    queue.done("a")
    thread.join(WAIT)
    assert out == ["a"]  # processed again, once
    queue.done("a")
    assert len(queue) == 0


def test_done_without_readd_does_not_requeue(queue: Queue[str]) -> None:
    queue.add("a")
    queue.done(queue.get())
    assert len(queue) == 0


def test_one_item_is_never_processed_concurrently() -> None:
    queue: Queue[str] = Queue(name="test-concurrency")
    active: dict[str, int] = {}
    overlaps: list[str] = []
    processed: list[str] = []
    lock = threading.Lock()
    first_in_flight = threading.Event()
    release = threading.Event()

    def worker() -> None:
        while True:
            try:
                item = queue.get()
            except ShutDownError:
                return
            with lock:
                active[item] = active.get(item, 0) + 1
                if active[item] > 1:
                    overlaps.append(item)
                processed.append(item)
            first_in_flight.set()
            release.wait(WAIT)
            with lock:
                active[item] -= 1
            queue.done(item)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for w in workers:
        w.start()
    queue.add("a")
    assert first_in_flight.wait(WAIT)
    for _ in range(20):  # re-adds while "a" is in flight; three idle workers are waiting
        queue.add("a")
    time.sleep(0.05)
    assert processed == ["a"]
    release.set()
    queue.shut_down()  # the worker holding "a" still gets its dirty re-add: done() queues it
    for w in workers:
        w.join(WAIT)
    assert overlaps == []
    assert processed == ["a", "a"]  # the twenty re-adds collapsed into one more pass


def test_shut_down_wakes_blocked_getters() -> None:
    queue: Queue[str] = Queue(name="test-shutdown")
    threads = [get_in_thread(queue) for _ in range(3)]
    queue.shut_down()
    for thread, out in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
        assert isinstance(out[0], ShutDownError)


def test_after_shut_down_adds_are_ignored_and_queued_items_handed_out() -> None:
    queue: Queue[str] = Queue(name="test-shutdown")
    queue.add("a")
    queue.shut_down()
    queue.add("b")
    assert queue.get() == "a"
    with pytest.raises(ShutDownError):
        queue.get()


def test_add_after_releases_items_in_ready_order() -> None:
    clock = FakeClock()
    queue: DelayingQueue[str] = DelayingQueue(name="test-delay", clock=clock)
    queue.add_after("late", 3.0)
    queue.add_after("early", 1.0)
    queue.add_after("middle", 2.0)
    clock.settle()
    assert len(queue) == 0
    clock.step(1.5)
    assert queue.get() == "early"
    clock.settle()
    assert len(queue) == 0
    clock.step(10.0)
    assert queue.get() == "middle"
    assert queue.get() == "late"
    queue.shut_down()


def test_add_after_keeps_the_earlier_ready_time() -> None:
    clock = FakeClock()
    queue: DelayingQueue[str] = DelayingQueue(name="test-delay", clock=clock)
    queue.add_after("a", 5.0)
    queue.add_after("a", 1.0)  # earlier: wins
    queue.add_after("a", 9.0)  # later: ignored
    clock.step(1.0)
    assert queue.get() == "a"
    queue.done("a")
    clock.step(10.0)  # the stale heap entries must not add it again
    clock.settle()
    assert len(queue) == 0
    queue.shut_down()


def test_add_after_non_positive_delay_adds_now() -> None:
    queue: DelayingQueue[str] = DelayingQueue(name="test-delay", clock=FakeClock())
    queue.add_after("a", 0)
    assert queue.get() == "a"
    queue.shut_down()


def test_add_after_waits_real_time() -> None:
    queue: DelayingQueue[str] = DelayingQueue(name="test-delay-real")
    started = time.monotonic()
    queue.add_after("a", 0.05)
    assert queue.get() == "a"
    assert 0.04 <= time.monotonic() - started < WAIT
    queue.shut_down()


def test_shut_down_stops_the_timer_and_drops_waiting_items() -> None:
    clock = FakeClock()
    queue: DelayingQueue[str] = DelayingQueue(name="test-delay", clock=clock)
    queue.add_after("a", 1.0)
    clock.settle()
    queue.shut_down()
    timer = queue._timer_thread
    assert timer is not None
    timer.join(WAIT)
    assert not timer.is_alive()
    clock.step(5.0)
    with pytest.raises(ShutDownError):
        queue.get()


def test_rate_limited_backoff_counts_and_forget() -> None:
    clock = FakeClock()
    limiter = ItemExponentialFailureRateLimiter[str](base=1.0, max_delay=100.0)
    queue: RateLimitingQueue[str] = RateLimitingQueue(name="test-rl", rate_limiter=limiter, clock=clock)
    queue.add_rate_limited("a")  # due after 1 s
    queue.add_rate_limited("a")  # 2 s: keeps the earlier time
    assert queue.num_requeues("a") == 2
    clock.step(1.0)
    assert queue.get() == "a"
    queue.done("a")
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.shut_down()


def sample(name: str, queue_name: str) -> float:
    return registry.get_sample_value(name, {"name": queue_name}) or 0.0


def test_metrics() -> None:
    clock = FakeClock()
    name = "test-metrics"
    adds, retries = sample("gpu_workqueue_adds_total", name), sample("gpu_workqueue_retries_total", name)
    work_count = sample("gpu_workqueue_work_duration_seconds_count", name)
    queue: RateLimitingQueue[str] = RateLimitingQueue(name=name, clock=clock, metrics=METRICS)
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert sample("gpu_workqueue_adds_total", name) - adds == 2
    assert sample("gpu_workqueue_depth", name) == 2
    queue.get()
    clock.step(3.0)
    assert sample("gpu_workqueue_depth", name) == 1
    assert sample("gpu_workqueue_unfinished_work_seconds", name) == 3.0
    assert sample("gpu_workqueue_longest_running_processor_seconds", name) == 3.0
    queue.done("a")
    assert sample("gpu_workqueue_work_duration_seconds_count", name) - work_count == 1
    assert sample("gpu_workqueue_unfinished_work_seconds", name) == 0.0
    queue.add_rate_limited("c")
    assert sample("gpu_workqueue_retries_total", name) - retries == 1
    queue.shut_down()
