"""The in-flight record of our writes, the claim indexes and which events wake which claims."""

from __future__ import annotations

from typing import Any

from kubernetes.client import (
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1Namespace,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
)
from testutil.k8s_fields import meta, spec_of
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact, with_allocation
from testutil.unit.dracontroller.dra_controller_fakes import our_mig_class

from pkg.dracontroller.internal.indexes import (
    CLAIM_BY_CLASS,
    CLAIM_INDEXERS,
    CLAIM_OURS_BY_POOL,
    CLAIM_PENDING,
    PENDING,
)
from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US
from pkg.dracontroller.internal.service import InFlight
from pkg.dracontroller.internal.watch import (
    allocation_landed_watch,
    capacity_freed_watch,
    class_watch,
    namespace_watch,
    pod_watch,
    slice_watch,
)
from pkg.framework.cache.store import Store
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.controller.controller import Controller
from pkg.framework.reconcile.contract import Request, Result


def versioned(c: Any, rv: str) -> Any:
    c = c.model_copy(deep=True)
    c.metadata.resource_version = rv
    return c


def allocated(name: str, pool: str = "p1", *, ours: bool = False) -> Any:
    result = V1DeviceRequestAllocationResult(request="gpu", driver="gpu.deckhouse.io", pool=pool, device="d")
    c = with_allocation(
        claim(name, exact("gpu", "mig-1g")),
        V1AllocationResult(devices=V1DeviceAllocationResult(results=[result])),
    )
    meta(c).annotations = {ALLOCATED_BY: ALLOCATED_BY_US} if ours else None
    return c


def test_in_flight_serves_the_written_version_until_the_cache_moves() -> None:
    in_flight = InFlight()
    cached = versioned(claim("c", exact("gpu", "x")), "1")
    in_flight.record(versioned(cached, "2"), superseded=["1"])
    in_flight.record(versioned(cached, "3"), superseded=["2"])
    assert meta(in_flight.resolve(cached)).resource_version == "3"
    assert meta(in_flight.resolve(versioned(cached, "2"))).resource_version == "3"
    assert meta(in_flight.resolve(versioned(cached, "3"))).resource_version == "3"
    assert len(in_flight) == 0  # caught up: dropped
    in_flight.record(versioned(cached, "4"), superseded=["3"])
    in_flight.prune(set())
    assert len(in_flight) == 0


def test_claim_indexes() -> None:
    store: Store[Any] = Store(indexers=CLAIM_INDEXERS)
    pending = claim("pending", exact("gpu", "mig-1g"))
    generated = claim("generated", exact("gpu", "mig-1g"))
    meta(generated).owner_references = [V1OwnerReference(api_version="v1", kind="Pod", name="p", uid="u")]
    for c in (pending, generated, allocated("theirs"), allocated("ours", ours=True)):
        store.update(c)
    assert [c.metadata.name for c in store.by_index(CLAIM_PENDING, PENDING)] == ["pending"]
    assert [c.metadata.name for c in store.by_index(CLAIM_BY_CLASS, "mig-1g")] == ["pending"]
    assert [c.metadata.name for c in store.by_index(CLAIM_OURS_BY_POOL, "gpu.deckhouse.io/p1")] == ["ours"]


class RecordingController:
    """Collects the handlers a watcher registers and replays events through them."""

    name = "test"

    def __init__(self) -> None:
        self.queue: list[Request] = []
        self._handlers: list[Any] = []

    def watch(self, source: Any, handler: Any, *, predicates: Any = ()) -> None:
        from pkg.framework.controller.enqueue import EnqueueingListener

        self._handlers.append(EnqueueingListener(mapper=handler, queue=self, predicates=predicates))

    def add(self, item: Request) -> None:
        self.queue.append(item)

    def update(self, old: Any, new: Any) -> list[str]:
        self.queue.clear()
        for h in self._handlers:
            h.on_update(old, new)
        return sorted({r.name for r in self.queue})

    def delete(self, obj: Any) -> list[str]:
        self.queue.clear()
        for h in self._handlers:
            h.on_delete(obj)
        return sorted({r.name for r in self.queue})


class Source:
    kind = RESOURCE_CLAIM


def watched(watcher: Any) -> RecordingController:
    controller = RecordingController()
    watcher.watch(Source(), controller)
    return controller


def claim_store() -> Store[Any]:
    store: Store[Any] = Store(indexers=CLAIM_INDEXERS)
    for c in (
        claim("pending", exact("gpu", "mig-1g")),
        allocated("ours", ours=True),
        allocated("far", "p2", ours=True),
    ):
        store.update(c)
    return store


def test_released_allocation_wakes_pending_claims_and_new_allocation_wakes_ours_in_the_pool() -> None:
    store = claim_store()
    controller = watched(capacity_freed_watch(store))
    landed: Any = allocation_landed_watch(store)  # the recording fakes stand in for the framework's
    landed.watch(Source(), controller)  # both claim watches feed one queue
    unallocated = claim("x", exact("gpu", "mig-1g"))
    assert controller.update(allocated("x"), unallocated) == ["pending"]
    assert controller.delete(allocated("x")) == ["pending"]
    assert controller.update(unallocated, allocated("x")) == ["ours"]
    assert controller.update(allocated("x"), allocated("x")) == []  # no change of allocation


def test_slice_change_wakes_pending_and_ours_in_its_pool() -> None:
    controller = watched(slice_watch(claim_store()))
    rs = a30_pool()[1]
    rs.spec.pool.name = "p1"
    changed = rs.model_copy(deep=True)
    changed.spec.pool.generation = 2
    assert controller.update(rs, changed) == ["ours", "pending"]
    assert controller.update(rs, rs) == []


def test_class_change_wakes_the_claims_naming_it() -> None:
    controller = watched(class_watch(claim_store()))
    old, new = our_mig_class("1g"), our_mig_class("1g")
    spec_of(new).selectors = []
    assert controller.update(old, new) == ["pending"]


def test_pod_referencing_a_claim_wakes_it() -> None:
    controller = watched(pod_watch())
    bare = V1Pod(metadata=V1ObjectMeta(name="p", namespace="default"), spec=V1PodSpec(containers=[]))
    with_claim = bare.model_copy(deep=True)
    spec_of(with_claim).resource_claims = [V1PodResourceClaim(name="g", resource_claim_name="pending")]
    assert controller.update(bare, with_claim) == ["pending"]
    assert controller.update(with_claim, with_claim) == []


def test_namespace_label_change_wakes_its_pending_claims() -> None:
    controller = watched(namespace_watch(claim_store()))
    old = V1Namespace(metadata=V1ObjectMeta(name="default"))
    new = V1Namespace(
        metadata=V1ObjectMeta(name="default", labels={"resource.kubernetes.io/admin-access": "true"})
    )
    assert controller.update(old, new) == ["pending"]
    assert controller.update(new, new) == []


def test_rate_limiter_and_controller_wiring() -> None:
    from pkg.dracontroller.setup import rate_limiter

    limiter = rate_limiter()
    request = Request(name="c", namespace="default")
    assert limiter.when(request) == 0.25
    assert limiter.when(request) == 0.5
    controller = Controller(name="t", reconciler=lambda r: Result(), rate_limiter=limiter)  # type: ignore[arg-type]
    assert controller.needs_leader_election
