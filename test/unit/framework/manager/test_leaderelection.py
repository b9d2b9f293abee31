"""Leader election against an in-memory Lease store with the API server's resourceVersion rules."""

from __future__ import annotations

import copy
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.client import V1Lease, V1LeaseSpec, V1ObjectMeta

from pkg.framework.client import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    InvalidError,
    NotFoundError,
    ResourceKind,
)
from pkg.framework.client.builtin_kinds import LEASE
from pkg.framework.manager.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    micro_time,
)
from pkg.framework.metrics import MetricsProvider

# The framework is handed a provider; the tests hand it one named like the project's.
METRICS = MetricsProvider(namespace="gpu")
registry = METRICS.registry

NAME, NAMESPACE = "gpu-controller", "d8-gpu-control-plane"
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class FakeLeaseStore:
    """get/create/update of Leases with resourceVersion conflicts and MicroTime validation."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.fail_writes: Exception | None = None
        self.after_get: Callable[[], None] | None = None
        self._lock = threading.RLock()

    def get(self, kind: ResourceKind[V1Lease], name: str, namespace: str | None = None) -> V1Lease:
        with self._lock:
            raw = self.objects.get((namespace or "", name))
            if raw is None:
                raise NotFoundError(status=404, reason="NotFound", message=f"lease {name} not found")
            lease = kind.decode(copy.deepcopy(raw))
        hook, self.after_get = self.after_get, None
        if hook is not None:
            hook()  # lets a test write between this read and the caller's update
        return lease

    def create(self, kind: ResourceKind[V1Lease], obj: V1Lease, namespace: str | None = None) -> V1Lease:
        raw = self._validated(kind, obj)
        with self._lock:
            key = (namespace or raw["metadata"]["namespace"], raw["metadata"]["name"])
            if key in self.objects:
                raise AlreadyExistsError(status=409, reason="AlreadyExists", message="exists")
            return self._store(kind, key, raw)

    def update(self, kind: ResourceKind[V1Lease], obj: V1Lease) -> V1Lease:
        raw = self._validated(kind, obj)
        with self._lock:
            key = (raw["metadata"]["namespace"], raw["metadata"]["name"])
            current = self.objects.get(key)
            if current is None:
                raise NotFoundError(status=404, reason="NotFound", message="gone")
            if raw["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ConflictError(status=409, reason="Conflict", message="object has been modified")
            return self._store(kind, key, raw)

    def put(self, spec: V1LeaseSpec) -> None:
        """Writes the lease as another process would."""
        meta = V1ObjectMeta(name=NAME, namespace=NAMESPACE)
        with self._lock:
            self._store(LEASE, (NAMESPACE, NAME), LEASE.encode(V1Lease(metadata=meta, spec=spec)))

    def spec(self) -> V1LeaseSpec:
        return self.get(LEASE, NAME, NAMESPACE).spec or V1LeaseSpec()

    def _validated(self, kind: ResourceKind[V1Lease], obj: V1Lease) -> dict[str, Any]:
        if self.fail_writes is not None:
            raise self.fail_writes
        raw = kind.encode(obj)
        for field in ("acquireTime", "renewTime"):
            value = raw.get("spec", {}).get(field)
            if value is not None and not MICRO_TIME.fullmatch(value):
                raise InvalidError(status=422, reason="Invalid", message=f"{field} {value!r} is no MicroTime")
        return raw

    def _store(self, kind: ResourceKind[V1Lease], key: tuple[str, str], raw: dict[str, Any]) -> V1Lease:
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = raw
        return kind.decode(copy.deepcopy(raw))


class FakeClock:
    """Time moves only when someone sleeps; wall time starts on a whole second (no microseconds)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.base = datetime(2025, 1, 1, tzinfo=UTC)

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return self.base + timedelta(seconds=self.t)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        raise AssertionError("the elector pauses through its sleep function, never on the clock")

    def sleep(self, stop: threading.Event, seconds: float) -> bool:
        self.t += seconds
        time.sleep(0.001)  # let other threads run
        return stop.is_set()


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.started = threading.Event()
        self.stopped = threading.Event()

    def callbacks(self) -> LeaderCallbacks:
        return LeaderCallbacks(
            on_started_leading=self._started,
            on_stopped_leading=self._stopped,
            on_new_leader=lambda identity: self.calls.append(f"new_leader:{identity}"),
        )

    def _started(self, stop_leading: threading.Event) -> None:
        self.calls.append("started")
        self.started.set()
        stop_leading.wait()

    def _stopped(self) -> None:
        self.calls.append("stopped")
        self.stopped.set()


def elector(
    store: FakeLeaseStore, clock: FakeClock | None, identity: str, recorder: Recorder | None = None
) -> LeaderElector:
    """An elector on the fake clock, or on real time with short periods when ``clock`` is None."""
    callbacks = (recorder or Recorder()).callbacks()
    if clock is None:
        config = LeaderElectionConfig(
            lease_name=NAME, lease_namespace=NAMESPACE, identity=identity,
            lease_duration=2, renew_deadline=1, retry_period=0.1,
        )  # fmt: skip
        return LeaderElector(config=config, client=store, callbacks=callbacks, metrics=METRICS)
    config = LeaderElectionConfig(lease_name=NAME, lease_namespace=NAMESPACE, identity=identity)
    return LeaderElector(
        config=config, client=store, callbacks=callbacks, clock=clock, sleep=clock.sleep, metrics=METRICS
    )


def other_holder(clock: FakeClock, *, transitions: int = 3) -> V1LeaseSpec:
    now = micro_time(clock.now())
    return V1LeaseSpec(
        holder_identity="other",
        lease_duration_seconds=15,
        acquire_time=now,
        renew_time=now,
        lease_transitions=transitions,
    )


def run_in_thread(target: Callable[[threading.Event], None]) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(stop,), daemon=True)
    thread.start()
    return thread, stop


def test_acquires_an_absent_lease() -> None:
    store, clock = FakeLeaseStore(), FakeClock()
    a = elector(store, clock, "a")
    assert a.try_acquire_or_renew()
    spec = store.spec()
    assert (spec.holder_identity, spec.lease_duration_seconds, spec.lease_transitions) == ("a", 15, 0)
    assert a.is_leader()


def test_does_not_take_a_fresh_lease_of_another_holder() -> None:
    store, clock = FakeLeaseStore(), FakeClock()
    store.put(other_holder(clock))
    b = elector(store, clock, "b")
    assert not b.try_acquire_or_renew()
    clock.t += 14
    assert not b.try_acquire_or_renew()
    assert store.spec().holder_identity == "other"
    assert b.leader() == "other"


def test_takes_over_an_expired_lease_and_counts_the_transition() -> None:
    store, clock = FakeLeaseStore(), FakeClock()
    store.put(other_holder(clock, transitions=3))
    b = elector(store, clock, "b")
    assert not b.try_acquire_or_renew()
    clock.t += 16
    assert b.try_acquire_or_renew()
    spec = store.spec()
    assert (spec.holder_identity, spec.lease_transitions) == ("b", 4)


def test_expiry_follows_local_observation_not_the_holders_clock() -> None:
    # The holder's clock is an hour behind: its renewTime looks ancient but it is renewing.
    store, clock = FakeLeaseStore(), FakeClock()
    skewed = other_holder(clock).model_copy(
        update={"renew_time": micro_time(clock.now() - timedelta(hours=1))}
    )
    store.put(skewed)
    b = elector(store, clock, "b")
    assert not b.try_acquire_or_renew()
    for _ in range(5):  # the holder keeps renewing (with its skewed clock) every 10 s
        clock.t += 10
        renewed = store.spec().model_copy(update={"renew_time": micro_time(clock.now() - timedelta(hours=1))})
        store.put(renewed)
        assert not b.try_acquire_or_renew()
    assert store.spec().holder_identity == "other"


def test_callbacks_run_in_order_and_release_on_cancel_frees_the_lease() -> None:
    store, clock, recorder = FakeLeaseStore(), FakeClock(), Recorder()
    a = elector(store, clock, "a", recorder)
    thread, stop = run_in_thread(a.run)
    assert recorder.started.wait(2)
    assert registry.get_sample_value("gpu_leader_election_master_status", {"name": NAME}) == 1
    stop.set()
    thread.join(2)
    assert not thread.is_alive()
    assert recorder.calls == ["new_leader:a", "started", "stopped"]
    spec = store.spec()
    assert not spec.holder_identity
    assert spec.lease_duration_seconds == 1
    assert spec.renew_time is not None
    assert abs((spec.renew_time - clock.now()).total_seconds()) < 1
    assert registry.get_sample_value("gpu_leader_election_master_status", {"name": NAME}) == 0
    # A successor takes the released lease at once, without waiting for a lease duration.
    b = elector(store, clock, "b")
    assert b.try_acquire_or_renew()
    assert store.spec().lease_transitions == 1


def test_renew_failing_past_the_deadline_stops_leading() -> None:
    store, clock, recorder = FakeLeaseStore(), FakeClock(), Recorder()
    a = elector(store, clock, "a", recorder)
    thread, stop = run_in_thread(a.run)
    assert recorder.started.wait(2)
    store.fail_writes = ApiError(status=500, reason="InternalError", message="etcd unavailable")
    assert recorder.stopped.wait(2)
    thread.join(2)
    assert not thread.is_alive()
    assert not stop.is_set()
    assert recorder.calls == ["new_leader:a", "started", "stopped"]
    last_renewed = store.spec().renew_time
    assert last_renewed is not None
    failing_for = (clock.now() - last_renewed).total_seconds()
    assert 9.99 <= failing_for < 15  # gave up after renew_deadline, before anyone could take over


def test_a_holder_change_seen_while_renewing_stops_leading_at_once() -> None:
    store, clock, recorder = FakeLeaseStore(), FakeClock(), Recorder()
    a = elector(store, clock, "a", recorder)
    assert a.try_acquire_or_renew()
    store.put(other_holder(clock))  # someone overwrote the lease
    assert not a.try_acquire_or_renew()
    assert not a.is_leader()
    assert a.leader() == "other"


def test_conflict_between_read_and_write_loses_the_round() -> None:
    store, clock = FakeLeaseStore(), FakeClock()
    store.put(V1LeaseSpec(lease_duration_seconds=1))  # released: free for anyone
    a, b = elector(store, clock, "a"), elector(store, clock, "b")

    def b_writes_in_between() -> None:
        assert b.try_acquire_or_renew()

    store.after_get = b_writes_in_between
    assert not a.try_acquire_or_renew()  # a's write carries a stale resourceVersion
    assert store.spec().holder_identity == "b"


def test_two_electors_on_one_store_exactly_one_leads() -> None:
    # Real time with short periods: two threads sharing one fake clock would each advance it.
    store, recorders = FakeLeaseStore(), [Recorder(), Recorder()]
    electors = [elector(store, None, name, rec) for name, rec in zip("ab", recorders, strict=True)]
    runs = [run_in_thread(e.run) for e in electors]
    deadline = time.monotonic() + 3
    while not any(r.started.is_set() for r in recorders) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(1.5)  # several renewals, and longer than the loser's renew deadline
    leaders = [identity for identity, e in zip("ab", electors, strict=True) if e.is_leader()]
    assert len(leaders) == 1
    assert sum(r.started.is_set() for r in recorders) == 1
    assert store.spec().holder_identity == leaders[0]
    assert all(e.leader() == leaders[0] for e in electors)
    for thread, stop in runs:
        stop.set()
        thread.join(2)
        assert not thread.is_alive()


def test_config_rejects_unsafe_timings() -> None:
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElectionConfig(lease_name=NAME, lease_namespace=NAMESPACE, lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElectionConfig(lease_name=NAME, lease_namespace=NAMESPACE, renew_deadline=2, retry_period=2)
    assert LeaderElectionConfig(lease_name=NAME, lease_namespace=NAMESPACE).identity


def test_a_round_stops_between_requests_past_the_renew_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, clock = FakeLeaseStore(), FakeClock()
    a = elector(store, clock, "a")
    assert a.try_acquire_or_renew()
    deadline = clock.monotonic() + 10
    store.fail_writes = ApiError(status=504, reason="Timeout", message="hung renewal")
    gets: list[float] = []
    original_get = store.get

    def slow_failing_get(*args: Any, **kwargs: Any) -> V1Lease:
        gets.append(clock.monotonic())
        return original_get(*args, **kwargs)

    monkeypatch.setattr(store, "get", slow_failing_get)
    clock.t = deadline - 1  # the renewal PUT fails just before the deadline...
    original_update = store.update

    def update_that_takes_two_seconds(*args: Any, **kwargs: Any) -> V1Lease:
        clock.t += 2  # ...after hanging past it
        return original_update(*args, **kwargs)

    monkeypatch.setattr(store, "update", update_that_takes_two_seconds)
    assert not a.try_acquire_or_renew(deadline=deadline)
    assert gets == []  # no further requests in this round: the deadline has passed
