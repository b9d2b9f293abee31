"""ControllerBuilder's controller options (controller-runtime's controller.Options): each one reaches
the controller it builds and changes what that controller does."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel

from pkg.framework.cache.listener import ResourceListener
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import CacheSyncTimeoutError, Controller
from pkg.framework.manager.manager import Manager
from pkg.framework.metrics import MetricsProvider
from pkg.framework.reconcile.contract import Request, Result, TerminalError
from pkg.framework.workqueue.priority import PriorityQueue
from pkg.framework.workqueue.queue import RateLimitingQueue

WAIT = 2.0


class Obj(BaseModel):
    metadata: V1ObjectMeta


KIND = ResourceKind(
    group="example.io", version="v1", kind="Thing", plural="things", namespaced=False, model=Obj
)


class FakeInformer:
    """An informer that holds one object and says whether it synced; records the sync timeout."""

    def __init__(self, *, synced: bool = True) -> None:
        self.kind = KIND
        self.synced = synced
        self.sync_timeouts: list[float] = []

    def add_listener(self, listener: ResourceListener[Any]) -> None:
        listener.on_add(Obj(metadata=V1ObjectMeta(name="thing-0")), is_in_initial_list=True)

    def wait_for_sync(self, timeout: float) -> bool:
        self.sync_timeouts.append(timeout)
        return self.synced


class Reconciler:
    def __init__(self, fn: Callable[[Request], Result]) -> None:
        self.fn = fn
        self.calls: list[Request] = []
        self.called = threading.Event()

    def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        self.called.set()
        return self.fn(request)


def builder(name: str, informer: FakeInformer) -> ControllerBuilder:
    manager = Manager(metrics=MetricsProvider(namespace="gpu"))
    return ControllerBuilder(manager, name=name).for_(informer).backoff(base=0.001, max_delay=0.01)


@contextmanager
def running(controller: Controller) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(WAIT)
        assert not thread.is_alive(), "run() did not return after stop"


def bug(request: Request) -> Result:
    raise KeyError("a bug")


def missing(request: Request) -> Result:
    raise TerminalError("no such thing")


def test_without_recover_panic_a_bug_stops_the_controller() -> None:
    reconciler = Reconciler(bug)
    controller = builder("opt-no-recover", FakeInformer()).recover_panic(False).complete(reconciler)
    with pytest.raises(KeyError, match="a bug"):
        controller.run(threading.Event())
    assert len(reconciler.calls) == 1


def test_with_recover_panic_a_bug_is_retried() -> None:
    retried = threading.Event()

    def fails_once(request: Request) -> Result:
        if len(reconciler.calls) == 1:
            raise KeyError("a bug")
        retried.set()
        return Result()

    reconciler = Reconciler(fails_once)
    controller = builder("opt-recover", FakeInformer()).recover_panic(True).complete(reconciler)
    with running(controller):
        assert retried.wait(WAIT)


def test_cache_sync_timeout_bounds_the_wait_for_the_caches() -> None:
    informer = FakeInformer(synced=False)
    reconciler = Reconciler(lambda request: Result())
    controller = builder("opt-sync", informer).cache_sync_timeout(7.5).complete(reconciler)
    with pytest.raises(CacheSyncTimeoutError, match=r"'opt-sync'.*7\.5s"):
        controller.run(threading.Event())
    [timeout] = informer.sync_timeouts
    assert 7.0 < timeout <= 7.5
    assert reconciler.calls == []


def test_cache_sync_timeout_defaults_to_two_minutes() -> None:
    informer = FakeInformer(synced=False)
    controller = builder("opt-sync-default", informer).complete(Reconciler(lambda request: Result()))
    with pytest.raises(CacheSyncTimeoutError, match="120s"):
        controller.run(threading.Event())
    assert informer.sync_timeouts[0] > 119


def test_cache_sync_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cache_sync_timeout"):
        builder("opt-sync-zero", FakeInformer()).cache_sync_timeout(0)


def test_log_constructor_builds_the_controller_and_request_loggers(caplog: pytest.LogCaptureFixture) -> None:
    asked: list[Request | None] = []

    def construct(request: Request | None) -> logging.LoggerAdapter[Any]:
        asked.append(request)
        return logging.LoggerAdapter(logging.getLogger("custom.things"), {"thing": str(request)})

    reconciler = Reconciler(missing)
    controller = builder("opt-log", FakeInformer()).log_constructor(construct).complete(reconciler)
    with caplog.at_level(logging.INFO, logger="custom.things"), running(controller):
        assert reconciler.called.wait(WAIT)
    assert asked[0] is None
    assert Request(name="thing-0") in asked
    [failure] = [r for r in caplog.records if "terminal error" in r.getMessage()]
    assert failure.name == "custom.things"
    assert failure.__dict__["thing"] == "thing-0"


def test_the_default_logger_names_the_controller_and_the_request(caplog: pytest.LogCaptureFixture) -> None:
    reconciler = Reconciler(missing)
    controller = builder("opt-log-default", FakeInformer()).complete(reconciler)
    with caplog.at_level(logging.INFO), running(controller):
        assert reconciler.called.wait(WAIT)
    [failure] = [r for r in caplog.records if "terminal error" in r.getMessage()]
    assert failure.name == "controller.opt-log-default"
    assert failure.__dict__["controller"] == "opt-log-default"
    assert failure.__dict__["request"] == "thing-0"


def test_the_priority_queue_is_the_default() -> None:
    controller = builder("opt-pq-default", FakeInformer()).complete(Reconciler(lambda r: Result()))
    assert isinstance(controller.queue, PriorityQueue)


def test_use_priority_queue_false_gives_the_fifo_queue() -> None:
    controller = (
        builder("opt-pq-off", FakeInformer())
        .use_priority_queue(False)
        .complete(Reconciler(lambda r: Result()))
    )
    assert type(controller.queue) is RateLimitingQueue
