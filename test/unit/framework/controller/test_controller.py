"""Controller: result handling per the reconcile contract, panics, concurrency, sync, shutdown, metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel

from pkg.framework.cache.listener import ResourceListener
from pkg.framework.client.errors import ConflictError
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.controller.controller import CacheSyncTimeoutError, Controller
from pkg.framework.controller.enqueue import EnqueueRequestForObject
from pkg.framework.controller.predicate import Funcs
from pkg.framework.metrics import MetricsProvider
from pkg.framework.reconcile import SingletonReconciler
from pkg.framework.reconcile.contract import Request, Result, TerminalError
from pkg.framework.workqueue.ratelimiter import ItemExponentialFailureRateLimiter

# The framework is handed a provider; the tests hand it one named like the project's.
METRICS = MetricsProvider(namespace="gpu")
registry = METRICS.registry

WAIT = 2.0


class Obj(BaseModel):
    metadata: V1ObjectMeta


KIND = ResourceKind(
    group="gpu.deckhouse.io",
    version="v1alpha1",
    kind="PhysicalGPU",
    plural="physicalgpus",
    namespaced=False,
    model=Obj,
)


class FakeSource:
    def __init__(self, *, synced: bool = True, kind: ResourceKind[Any] = KIND) -> None:
        self.kind = kind
        self.synced = synced
        self.handlers: list[ResourceListener[Any]] = []

    def add_listener(self, handler: ResourceListener[Any]) -> None:
        self.handlers.append(handler)

    def has_synced(self) -> bool:
        return self.synced

    def wait_for_sync(self, timeout: float) -> bool:
        return self.synced

    def add(self, name: str, *, generation: int = 1) -> None:
        for handler in self.handlers:
            handler.on_add(
                Obj(metadata=V1ObjectMeta(name=name, generation=generation)), is_in_initial_list=False
            )


class FuncReconciler:
    def __init__(self, fn: Callable[[Request], Result]) -> None:
        self.fn = fn
        self.calls: list[Request] = []

    def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        return self.fn(request)


def signalling(event: threading.Event) -> Callable[[Request], Result]:
    """Reconciles successfully and sets ``event``."""

    def fn(request: Request) -> Result:
        event.set()
        return Result()

    return fn


def blocking(entered: threading.Event, release: threading.Event) -> Callable[[Request], Result]:
    """Sets ``entered``, then holds the worker until ``release`` is set."""

    def fn(request: Request) -> Result:
        entered.set()
        release.wait(WAIT)
        return Result()

    return fn


def fast_limiter() -> ItemExponentialFailureRateLimiter[Request]:
    return ItemExponentialFailureRateLimiter[Request](base=0.001, max_delay=0.01)


def make(
    name: str, fn: Callable[[Request], Result], **options: Any
) -> tuple[Controller, FuncReconciler, FakeSource]:
    reconciler = FuncReconciler(fn)
    options.setdefault("rate_limiter", fast_limiter())
    controller = Controller(name=name, reconciler=reconciler, metrics=METRICS, **options)
    source = FakeSource()
    controller.watch(source, EnqueueRequestForObject())
    return controller, reconciler, source


@contextmanager
def running(controller: Controller) -> Iterator[threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(WAIT)
        assert not thread.is_alive(), "run() did not return after stop"


def metric(name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_success_forgets_and_counts() -> None:
    done = threading.Event()
    controller, reconciler, source = make("t-success", signalling(done))
    with running(controller):
        source.add("gpu-0")
        assert done.wait(WAIT)
    assert reconciler.calls == [Request("gpu-0")]
    assert controller.queue.num_requeues(Request("gpu-0")) == 0
    assert metric("gpu_reconcile_total", controller="t-success", result="success") == 1
    assert metric("gpu_reconcile_time_seconds_count", controller="t-success") == 1
    assert metric("gpu_reconcile_total", controller="t-success", result="error") == 0  # series exists at zero


def test_error_backs_off_until_success_then_forgets() -> None:
    seen_requeues: list[int] = []
    done = threading.Event()
    controller: Controller

    def fn(request: Request) -> Result:
        seen_requeues.append(controller.queue.num_requeues(request))
        if len(seen_requeues) <= 3:
            raise ConflictError(status=409, reason="Conflict", message="stale")
        done.set()
        return Result()

    controller, _, source = make("t-error", fn)
    with running(controller):
        source.add("gpu-0")
        assert done.wait(WAIT)
    assert seen_requeues == [0, 1, 2, 3]
    assert controller.queue.num_requeues(Request("gpu-0")) == 0
    assert metric("gpu_reconcile_errors_total", controller="t-error") == 3
    assert metric("gpu_reconcile_total", controller="t-error", result="error") == 3
    assert metric("gpu_reconcile_panics_total", controller="t-error") == 0


def test_terminal_error_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    calls = threading.Event()

    def fn(request: Request) -> Result:
        calls.set()
        raise TerminalError("bad spec")

    controller, reconciler, source = make("t-terminal", fn)
    with caplog.at_level(logging.ERROR), running(controller):
        source.add("gpu-0")
        assert calls.wait(WAIT)
        time.sleep(0.05)  # a retry would come after 1 ms
    assert reconciler.calls == [Request("gpu-0")]
    assert controller.queue.num_requeues(Request("gpu-0")) == 0
    assert metric("gpu_reconcile_errors_total", controller="t-terminal") == 1
    record = next(r for r in caplog.records if "terminal" in r.getMessage())
    assert (record.__dict__["controller"], record.__dict__["request"]) == ("t-terminal", "gpu-0")


def test_requeue_after_forgets_and_delays() -> None:
    times: list[float] = []
    done = threading.Event()
    limiter = fast_limiter()

    def fn(request: Request) -> Result:
        times.append(time.monotonic())
        if len(times) == 1:
            limiter.when(request)  # pretend earlier failures
            return Result(requeue_after=timedelta(milliseconds=50))
        done.set()
        return Result()

    controller, _, source = make("t-after", fn, rate_limiter=limiter)
    with running(controller):
        source.add("gpu-0")
        assert done.wait(WAIT)
    assert times[1] - times[0] >= 0.045
    assert controller.queue.num_requeues(Request("gpu-0")) == 0
    assert metric("gpu_reconcile_total", controller="t-after", result="requeue_after") == 1


def test_requeue_uses_the_backoff() -> None:
    seen: list[int] = []
    done = threading.Event()

    def fn(request: Request) -> Result:
        seen.append(controller.queue.num_requeues(request))
        if len(seen) < 3:
            return Result(requeue=True)
        done.set()
        return Result()

    controller, _, source = make("t-requeue", fn)
    with running(controller):
        source.add("gpu-0")
        assert done.wait(WAIT)
    assert seen == [0, 1, 2]
    assert metric("gpu_reconcile_total", controller="t-requeue", result="requeue") == 2


def test_unexpected_exception_is_recovered_and_the_worker_continues(caplog: pytest.LogCaptureFixture) -> None:
    done = threading.Event()

    def fn(request: Request) -> Result:
        if request.name == "buggy":
            raise KeyError("missing")
        done.set()
        return Result()

    controller, reconciler, source = make(
        "t-panic",
        fn,
        max_concurrent_reconciles=1,
        rate_limiter=ItemExponentialFailureRateLimiter[Request](base=10),
    )
    with caplog.at_level(logging.ERROR), running(controller):
        source.add("buggy")
        source.add("fine")
        assert done.wait(WAIT)
    assert reconciler.calls == [Request("buggy"), Request("fine")]
    assert controller.queue.num_requeues(Request("buggy")) == 1  # retried with backoff
    assert metric("gpu_reconcile_panics_total", controller="t-panic") == 1
    assert metric("gpu_reconcile_errors_total", controller="t-panic") == 1
    record = next(r for r in caplog.records if r.exc_info)
    assert record.__dict__["request"] == "buggy"


def test_unrecovered_exception_stops_the_controller() -> None:
    def buggy(request: Request) -> Result:
        raise KeyError("boom")

    controller, _, source = make("t-fatal", buggy, recover_panic=False)
    source.add("gpu-0")  # queued before start: handled by the first worker
    with pytest.raises(KeyError, match="boom"):
        controller.run(threading.Event())
    assert metric("gpu_reconcile_panics_total", controller="t-fatal") == 1


def test_workers_run_different_keys_concurrently_but_never_one_key_twice() -> None:
    barrier = threading.Barrier(3, timeout=WAIT)
    lock = threading.Lock()
    active: dict[str, int] = {}
    overlaps: list[str] = []
    a_entered, a_release, done = threading.Event(), threading.Event(), threading.Event()
    a_calls: list[int] = []

    def fn(request: Request) -> Result:
        with lock:
            active[request.name] = active.get(request.name, 0) + 1
            overlaps.extend([request.name] if active[request.name] > 1 else [])
        try:
            if request.name in ("x", "y", "z"):
                barrier.wait()  # breaks unless all three run at the same time
            elif request.name == "a":
                a_calls.append(1)
                if len(a_calls) == 1:
                    a_entered.set()
                    a_release.wait(WAIT)
                else:
                    done.set()
            return Result()
        finally:
            with lock:
                active[request.name] -= 1

    controller, _, source = make("t-workers", fn, max_concurrent_reconciles=3)
    with running(controller):
        for name in ("x", "y", "z"):
            source.add(name)
        source.add("a")
        assert a_entered.wait(WAIT)
        for _ in range(10):
            source.add("a")  # two idle workers could take it: the queue must not hand it out
        time.sleep(0.05)
        a_release.set()
        assert done.wait(WAIT)
    assert overlaps == []
    assert len(a_calls) == 2
    assert metric("gpu_reconcile_panics_total", controller="t-workers") == 0
    assert metric("gpu_reconcile_total", controller="t-workers", result="success") == 5


def test_active_workers_gauge() -> None:
    entered, release = threading.Event(), threading.Event()
    controller, _, source = make("t-active", blocking(entered, release))
    with running(controller):
        source.add("gpu-0")
        assert entered.wait(WAIT)
        assert metric("gpu_active_workers", controller="t-active") == 1
        release.set()
    assert metric("gpu_active_workers", controller="t-active") == 0


def test_cache_sync_timeout_names_controller_and_source() -> None:
    controller, reconciler, source = make("t-sync", lambda r: Result(), cache_sync_timeout=0.05)
    other = ResourceKind(group="", version="v1", kind="Node", plural="nodes", namespaced=False, model=Obj)
    controller.watch(FakeSource(synced=False, kind=other), EnqueueRequestForObject())
    source.add("gpu-0")
    with pytest.raises(CacheSyncTimeoutError, match=r"'t-sync'.*Node"):
        controller.run(threading.Event())
    assert reconciler.calls == []


def test_stop_lets_the_current_reconcile_finish_and_takes_no_more() -> None:
    entered, release = threading.Event(), threading.Event()
    controller, reconciler, source = make("t-stop", blocking(entered, release))
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    source.add("first")
    assert entered.wait(WAIT)
    source.add("second")
    stop.set()
    thread.join(0.2)
    assert thread.is_alive()  # waits for the reconcile in hand
    release.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert reconciler.calls == [Request("first")]
    waiting = len(controller.queue)
    controller.queue.add(Request("late"))
    assert len(controller.queue) == waiting, "the queue is shut down: adds are ignored"


def test_watch_applies_predicates() -> None:
    done = threading.Event()
    controller = Controller(name="t-predicates", reconciler=FuncReconciler(signalling(done)))
    source = FakeSource()
    controller.watch(
        source,
        EnqueueRequestForObject(),
        predicates=[Funcs(update=lambda old, new: old.metadata.generation != new.metadata.generation)],
    )
    old, new = (
        Obj(metadata=V1ObjectMeta(name="a", generation=1)),
        Obj(metadata=V1ObjectMeta(name="a", generation=1)),
    )
    source.handlers[0].on_update(old, new)
    assert len(controller.queue) == 0
    new.metadata.generation = 2
    source.handlers[0].on_update(old, new)
    assert len(controller.queue) == 1
    controller.queue.shut_down()


def test_a_controller_runs_once() -> None:
    controller, _, _ = make("t-once", lambda r: Result())
    stop = threading.Event()
    stop.set()
    controller.run(stop)
    with pytest.raises(RuntimeError, match="already started"):
        controller.run(stop)


def test_a_singleton_reconciler_refuses_a_second_worker() -> None:
    singleton = SingletonReconciler(request=Request("sync"), state=lambda: None, handlers=[])
    with pytest.raises(ValueError, match="at most 1 worker"):
        Controller(name="t-singleton", reconciler=singleton, max_concurrent_reconciles=2)
    assert Controller(name="t-singleton", reconciler=singleton)._workers == 1
