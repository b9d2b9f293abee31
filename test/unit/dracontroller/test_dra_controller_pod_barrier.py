"""The Pod reference check behind a read barrier, and the check after the write left pending.

The Pod cache here is a real store with the controller's index; whether it has "synced past" a
version is set by the test (``FakePodIndex.synced_to``), as a lagging, quiet or healthy watch
would leave it. The consistent LIST (the fallback) is the fake API's, which records every read.
"""

from __future__ import annotations

from typing import Any

from dependency_injector import providers
from pytest_mock import MockerFixture
from test_dra_controller_pod_race import env, pod
from testutil.k8s_fields import annotations_of, meta, name_of, resource_version_of, spec_of, status_of, uid_of
from testutil.unit.dra.allocator.alloc_builders import claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import Env

from pkg.domain.metrics import registry
from pkg.dracontroller.internal.eligibility import claims_of_pod
from pkg.dracontroller.internal.names import ALLOCATED_BY
from pkg.dracontroller.internal.pod_projection import project_pod
from pkg.dracontroller.internal.service import AfterWriteChecks, PodReferenceBarrier, PodReferenceReader
from pkg.framework.cache.store import Store
from pkg.framework.client.builtin_kinds import POD
from pkg.framework.reconcile.contract import Result


class FakePodIndex:
    """The Pod informer as the barrier sees it: a store and how far it has synced."""

    def __init__(self, store: Store[Any]) -> None:
        self.store = store
        self.synced_to = 0
        self.waits: list[tuple[str, float]] = []

    def wait_for_resource_version(self, resource_version: str, timeout: float) -> bool:
        self.waits.append((resource_version, timeout))
        return int(resource_version) <= self.synced_to


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def barrier_env(mocker: MockerFixture, *, synced_to: int = 10**9) -> tuple[Env, FakePodIndex, Clock]:
    e = env(mocker)
    index = FakePodIndex(e.pods)
    index.synced_to = synced_to
    barrier = PodReferenceBarrier(pods=index, fallback=PodReferenceReader(e.api), wait_seconds=0.5)
    clock = Clock()
    e.container.reset_singletons()  # rebuilt over the overrides below, as the process builds them
    e.container.pod_references.override(providers.Object(barrier))
    e.container.decisions.add_kwargs(after_write=AfterWriteChecks(clock=clock), after_write_wait=90.0)
    e.reconciler = e.container.reconciler()
    return e, index, clock


def barrier(outcome: str) -> float:
    return registry.get_sample_value("gpu_dra_pod_barrier_total", {"outcome": outcome}) or 0.0


def races(when: str) -> float:
    return registry.get_sample_value("gpu_dra_pod_reference_races_total", {"when": when}) or 0.0


def test_synced_cache_answers_without_reading_the_api_server(mocker: MockerFixture) -> None:
    e, index, _ = barrier_env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    before = barrier("cache")
    assert e.reconcile(c) == Result()
    assert status_of(e.stored(c)).allocation is not None
    assert e.api.pod_lists == [], "no LIST of the namespace's Pods"
    assert index.waits[0] == (resource_version_of(c), 0.5), "the barrier is the claim's version"
    assert barrier("cache") == before + 2  # before the write and right after it


def test_pod_reaching_the_cache_through_the_barrier_stops_the_write(mocker: MockerFixture) -> None:
    """The Pod was created before the claim; the cache gets it while the barrier waits."""
    e, index, _ = barrier_env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    late = pod("p", "c")

    def wait(resource_version: str, timeout: float) -> bool:
        e.pods.update(late)  # the watch delivers the Pod, then passes the claim's version
        return True

    index.wait_for_resource_version = wait  # type: ignore[method-assign]
    before = races("before-write")
    assert e.reconcile(c) == Result()
    assert e.api.writes == []
    assert races("before-write") == before + 1
    [(_, reason, message)] = e.events()
    assert reason == "LeftToScheduler"
    assert "default/p" in message


def test_late_cache_falls_back_to_the_consistent_read(mocker: MockerFixture) -> None:
    e, _, _ = barrier_env(mocker, synced_to=0)
    e.add_pod(pod("p", "c"), cached=False)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    before = barrier("fallback")
    assert e.reconcile(c) == Result()
    assert e.api.writes == []
    assert len(e.api.pod_lists) == 1
    assert barrier("fallback") == before + 1


def test_check_after_the_write_waits_off_the_lock_then_gives_back(mocker: MockerFixture) -> None:
    e, index, clock = barrier_env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    index.synced_to = int(resource_version_of(c))  # past the claim, not past our write
    result = e.reconcile(c)
    assert result.requeue_after is not None, "the check after the write is left pending"
    assert status_of(e.stored(c)).allocation is not None
    e.sync()
    clock.now = 1.0
    assert e.reconcile(c).requeue_after is not None, "still not past the written version: retried"
    assert e.api.pod_lists == [], "no read of the namespace while the cache is within its wait"
    # A Pod created during the write's round trip reaches the cache, and the cache passes the write.
    e.pods.update(pod("late", "c"))
    index.synced_to = 10**9
    before = races("after-write")
    assert e.reconcile(c) == Result()
    assert status_of(e.stored(c)).allocation is None
    assert ALLOCATED_BY not in annotations_of(e.stored(c))
    assert races("after-write") == before + 1
    assert e.container.decisions().pending_after_write() == 0


def test_pending_check_clears_when_no_pod_came(mocker: MockerFixture) -> None:
    e, index, _ = barrier_env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    index.synced_to = int(resource_version_of(c))
    assert e.reconcile(c).requeue_after is not None
    e.sync()
    index.synced_to = 10**9
    writes = len(e.api.writes)
    assert e.reconcile(c) == Result()
    assert len(e.api.writes) == writes
    assert status_of(e.stored(c)).allocation is not None
    assert e.container.decisions().pending_after_write() == 0


def test_pending_check_past_its_wait_asks_the_api_server(mocker: MockerFixture) -> None:
    e, index, clock = barrier_env(mocker)
    c = e.add(claim("c", exact("gpu", "mig-1g")))
    index.synced_to = int(resource_version_of(c))
    assert e.reconcile(c).requeue_after is not None
    e.sync()
    e.api.put_pod(pod("late", "c"))  # on the server, never delivered by the stuck watch
    clock.now = 91.0
    before = barrier("fallback")
    assert e.reconcile(c) == Result()
    assert barrier("fallback") == before + 1
    assert status_of(e.stored(c)).allocation is None


def test_pending_checks_back_off() -> None:
    checks = AfterWriteChecks(clock=Clock())
    c = claim("c", exact("gpu", "mig-1g"))
    meta(c).uid = "u"
    checks.add(c)
    entry = checks.get(c)
    assert entry is not None
    assert [checks.backoff(entry) for _ in range(8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_projection_keeps_what_the_rule_reads_and_little_else() -> None:
    full = pod("p", "c", phase="Running")
    meta(full).labels = {"app": "x" * 1000}
    meta(full).annotations = {"note": "y" * 5000}
    spec_of(full).node_name = "node-1"
    raw = POD.encode(full)
    projected = POD.decode(project_pod(raw))
    assert claims_of_pod(projected) == claims_of_pod(full) == ["default/c"]
    assert (name_of(projected), uid_of(projected)) == ("p", "pod-p")
    assert spec_of(projected).node_name == "node-1"
    assert status_of(projected).phase is None  # a finished Pod counts as much as a running one
    assert meta(projected).labels is None
    assert meta(projected).annotations is None
    done = pod("q", "c", phase="Succeeded")
    spec_of(done).node_name = "node-1"
    assert claims_of_pod(POD.decode(project_pod(POD.encode(done)))) == ["default/c"]
    deleted = POD.encode(pod("r", "c", phase="Pending"))
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert claims_of_pod(POD.decode(project_pod(deleted))) == [], "deleted before it was scheduled"
