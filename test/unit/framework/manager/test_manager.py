"""Manager: start order, leader gating, failure propagation, prompt stop, health endpoints."""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import V1Lease, V1LeaseSpec, V1ObjectMeta

from pkg.framework.client import AlreadyExistsError, ConflictError, NotFoundError, ResourceKind
from pkg.framework.client.builtin_kinds import LEASE
from pkg.framework.manager.leaderelection import LeaderElectionConfig
from pkg.framework.manager.manager import (
    LeaderElectionLostError,
    Manager,
    RunnableError,
    install_signal_handlers,
)
from pkg.framework.metrics import MetricsProvider

NAME, NAMESPACE = "gpu-controller", "d8-gpu-control-plane"


class LeaseStore:
    """A minimal in-memory Lease endpoint with resourceVersion conflicts."""

    def __init__(self) -> None:
        self.raw: dict[str, Any] | None = None
        self.rv = 0
        self._lock = threading.Lock()

    def get(self, kind: ResourceKind[V1Lease], name: str, namespace: str | None = None) -> V1Lease:
        with self._lock:
            if self.raw is None:
                raise NotFoundError(status=404, reason="NotFound", message="no lease")
            return kind.decode(copy.deepcopy(self.raw))

    def create(self, kind: ResourceKind[V1Lease], obj: V1Lease, namespace: str | None = None) -> V1Lease:
        with self._lock:
            if self.raw is not None:
                raise AlreadyExistsError(status=409, reason="AlreadyExists", message="exists")
            return self._store(kind.encode(obj))

    def update(self, kind: ResourceKind[V1Lease], obj: V1Lease) -> V1Lease:
        raw = kind.encode(obj)
        with self._lock:
            assert self.raw is not None
            if raw["metadata"].get("resourceVersion") != self.raw["metadata"]["resourceVersion"]:
                raise ConflictError(status=409, reason="Conflict", message="modified")
            return self._store(raw)

    def put(self, *, holder: str | None, duration: int) -> None:
        now = datetime.now(UTC).replace(microsecond=1)
        spec = V1LeaseSpec(holder_identity=holder, lease_duration_seconds=duration, renew_time=now)
        with self._lock:
            self._store(
                LEASE.encode(V1Lease(metadata=V1ObjectMeta(name=NAME, namespace=NAMESPACE), spec=spec))
            )

    def holder(self) -> str | None:
        return (self.get(LEASE, NAME).spec or V1LeaseSpec()).holder_identity

    def _store(self, raw: dict[str, Any]) -> V1Lease:
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        self.raw = raw
        return LEASE.decode(copy.deepcopy(raw))


class FakeRunnable:
    def __init__(self, name: str, *, leader: bool = False, fail_after: float | None = None) -> None:
        self.name = name
        self.needs_leader_election = leader
        self.started = threading.Event()
        self.stopped = threading.Event()
        self._fail_after = fail_after

    def run(self, stop: threading.Event) -> None:
        self.started.set()
        if self._fail_after is not None and not stop.wait(self._fail_after):
            raise RuntimeError(f"{self.name} broke")
        stop.wait()
        self.stopped.set()


class FakeCache(FakeRunnable):
    def __init__(self, name: str, *, sync_after: float) -> None:
        super().__init__(name)
        self._sync_after = sync_after
        self.synced = threading.Event()

    def run(self, stop: threading.Event) -> None:
        self.started.set()
        if not stop.wait(self._sync_after):
            self.synced.set()
        stop.wait()
        self.stopped.set()

    def has_synced(self) -> bool:
        return self.synced.is_set()


def election_config(identity: str = "me") -> LeaderElectionConfig:
    return LeaderElectionConfig(
        lease_name=NAME, lease_namespace=NAMESPACE, identity=identity,
        lease_duration=2, renew_deadline=1, retry_period=0.1,
    )  # fmt: skip


def is_leading(manager: Manager) -> bool:
    """Whether ``manager`` holds the lease ``NAME``, as its leader-election gauge says."""
    gauge = manager.metrics.full_name("leader_election_master_status")
    return manager.metrics.registry.get_sample_value(gauge, {"name": NAME}) == 1


class Running:
    """Runs a manager on a thread and keeps what ``run`` raised."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.manager.run(self.stop)
        except BaseException as exc:
            self.error = exc

    def finish(self, timeout: float = 3.0) -> float:
        """Sets stop and returns how long ``run`` took to return."""
        began = time.monotonic()
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "manager did not stop"
        return time.monotonic() - began


def wait_for(predicate: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_leader_runnables_start_only_when_leading() -> None:
    store = LeaseStore()
    store.put(holder="other", duration=30)  # a fresh lease of another replica
    manager = Manager(leader_election=election_config(), lease_client=store)
    plain, leader = FakeRunnable("plain"), FakeRunnable("leader", leader=True)
    manager.add(plain)
    manager.add(leader)
    running = Running(manager)
    assert plain.started.wait(2)
    time.sleep(0.5)
    assert not leader.started.is_set()
    assert not is_leading(manager)
    store.put(holder=None, duration=1)  # the other replica released the lease
    assert leader.started.wait(3)
    assert is_leading(manager)
    assert store.holder() == "me"
    running.finish()
    assert running.error is None
    assert leader.stopped.is_set()
    assert plain.stopped.is_set()
    assert not store.holder()  # released on the way out


def test_without_leader_election_everything_starts_at_once() -> None:
    manager = Manager()
    runnables = [FakeRunnable("plain"), FakeRunnable("leader", leader=True)]
    for runnable in runnables:
        manager.add(runnable)
    running = Running(manager)
    assert all(r.started.wait(2) for r in runnables)
    assert running.finish() < 1
    assert all(r.stopped.is_set() for r in runnables)
    assert running.error is None


def test_caches_sync_before_other_runnables_start() -> None:
    manager = Manager()
    cache, plain = FakeCache("cache", sync_after=0.3), FakeRunnable("plain")
    manager.add(plain)
    manager.add(cache)
    running = Running(manager)
    assert cache.started.wait(2)
    assert not plain.started.is_set()
    assert plain.started.wait(2)
    assert cache.synced.is_set()
    running.finish()


def test_a_failing_runnable_stops_the_others_and_surfaces_its_error() -> None:
    manager = Manager()
    healthy, broken = FakeRunnable("healthy"), FakeRunnable("broken", fail_after=0.1)
    manager.add(healthy)
    manager.add(broken)
    with pytest.raises(RunnableError, match="broken") as raised:
        manager.run(threading.Event())
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert healthy.stopped.is_set()


def test_losing_the_lease_stops_everything_and_raises() -> None:
    store = LeaseStore()
    manager = Manager(leader_election=election_config(), lease_client=store)
    leader = FakeRunnable("leader", leader=True)
    manager.add(leader)
    running = Running(manager)
    assert leader.started.wait(3)
    store.put(holder="usurper", duration=30)  # someone else overwrote the lease
    running.thread.join(3)
    assert not running.thread.is_alive()
    assert isinstance(running.error, LeaderElectionLostError)
    assert leader.stopped.is_set()
    assert store.holder() == "usurper"


def test_stop_returns_promptly_and_a_manager_runs_once() -> None:
    manager = Manager()
    manager.add(FakeRunnable("plain"))
    running = Running(manager)
    time.sleep(0.1)
    assert running.finish() < 0.5
    with pytest.raises(RuntimeError, match="runs once"):
        manager.run(threading.Event())
    with pytest.raises(RuntimeError, match="already running"):
        manager.add(FakeRunnable("late"))


def test_health_and_readiness_are_served_with_metrics() -> None:
    manager = Manager(monitoring_bind_address="127.0.0.1:0", metrics=MetricsProvider(namespace="gpu"))
    manager.add(FakeCache("cache", sync_after=0.0))
    ready = threading.Event()

    def external_ready() -> None:
        if not ready.is_set():
            raise RuntimeError("not yet")

    manager.add_readyz_check("external", external_ready)
    server = manager._server
    assert server is not None
    base = f"http://127.0.0.1:{server.port}"
    running = Running(manager)
    assert wait_for(lambda: get(f"{base}/healthz") == (200, "ok"))
    status, body = get(f"{base}/readyz")
    assert status == 500
    assert "[-]external failed" in body
    ready.set()
    assert wait_for(lambda: get(f"{base}/readyz") == (200, "ok"))
    status, body = get(f"{base}/readyz?verbose")
    assert "[+]caches-synced ok" in body
    status, body = get(f"{base}/metrics")
    assert status == 200
    assert "gpu_leader_election_master_status" in body
    running.finish()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base}/healthz", timeout=1)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except urllib.error.URLError:
        return 0, ""


def test_sigterm_sets_stop_and_handlers_need_the_main_thread() -> None:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()
    try:
        install_signal_handlers(stop)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    errors: list[BaseException] = []

    def from_a_thread() -> None:
        try:
            install_signal_handlers(threading.Event())
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=from_a_thread)
    thread.start()
    thread.join()
    assert len(errors) == 1
