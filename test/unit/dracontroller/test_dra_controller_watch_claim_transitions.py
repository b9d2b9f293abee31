"""The two claim-to-claim watches, each on its own: which transitions pass, which claims they wake."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1AllocationResult, V1DeviceAllocationResult, V1DeviceRequestAllocationResult
from testutil.k8s_fields import meta
from testutil.unit.dra.allocator.alloc_builders import claim, exact, with_allocation

from pkg.dracontroller.internal.indexes import CLAIM_INDEXERS
from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US
from pkg.dracontroller.internal.watch import allocation_landed_watch, capacity_freed_watch
from pkg.framework.cache.store import Store
from pkg.framework.reconcile.contract import Request


def allocated(name: str, pool: str = "p1", *, ours: bool = False, device: str = "d") -> Any:
    result = V1DeviceRequestAllocationResult(
        request="gpu", driver="gpu.deckhouse.io", pool=pool, device=device
    )
    c = with_allocation(
        claim(name, exact("gpu", "mig-1g")),
        V1AllocationResult(devices=V1DeviceAllocationResult(results=[result])),
    )
    meta(c).annotations = {ALLOCATED_BY: ALLOCATED_BY_US} if ours else None
    meta(c).uid = f"uid-{name}"
    return c


def pending(name: str) -> Any:
    return claim(name, exact("gpu", "mig-1g"))


def store() -> Store[Any]:
    claims: Store[Any] = Store(indexers=CLAIM_INDEXERS)
    for c in (pending("waiting"), allocated("ours", ours=True), allocated("far", "p2", ours=True)):
        claims.update(c)
    return claims


def test_capacity_freed_passes_only_a_released_or_deleted_allocation_and_wakes_pending_claims() -> None:
    watch = capacity_freed_watch(store())
    assert watch.predicate.update(allocated("x"), pending("x"))
    assert not watch.predicate.update(pending("x"), allocated("x"))
    assert watch.predicate.delete(allocated("x"))
    assert not watch.predicate.delete(pending("x"))
    assert not watch.predicate.create(allocated("x"))
    assert watch.requests_for(allocated("x")) == [Request("waiting", "default")]


def test_allocation_landed_passes_a_new_or_changed_allocation_and_wakes_ours_in_its_pools() -> None:
    watch = allocation_landed_watch(store())
    assert watch.predicate.create(allocated("x"))
    assert not watch.predicate.create(pending("x"))
    assert watch.predicate.update(pending("x"), allocated("x"))
    assert watch.predicate.update(allocated("x"), allocated("x", device="e"))
    assert not watch.predicate.update(allocated("x"), allocated("x"))
    assert not watch.predicate.delete(allocated("x"))
    assert watch.requests_for(allocated("x")) == [Request("ours", "default")]
    assert watch.requests_for(allocated("ours", ours=True)) == []  # not itself
    assert watch.requests_for(pending("x")) == []
