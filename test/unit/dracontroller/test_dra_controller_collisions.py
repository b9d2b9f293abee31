"""Collision detection and re-allocation: who yields, and what the reconciler does about it."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ResourceClaimConsumerReference,
)
from pytest_mock import MockerFixture
from testutil.k8s_fields import allocation_results, annotations_of, meta, status_of
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact, with_allocation
from testutil.unit.dracontroller.dra_controller_fakes import Env, our_mig_class, our_physical_class

from pkg.dra.allocator.pools import gather_pools
from pkg.dracontroller.internal.collisions import must_yield
from pkg.dracontroller.internal.indexes import is_ours
from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US
from pkg.framework.reconcile.contract import Result

CARD = "gpu-0000-02-00-0"
POOL = f"gpus-node-a-{CARD}"


def held(
    name: str,
    *devices: str,
    ours: bool = False,
    reserved: bool = False,
    shares: dict[str, str] | None = None,
) -> ResourceV1ResourceClaim:
    results = [
        V1DeviceRequestAllocationResult(
            request="gpu",
            driver="gpu.deckhouse.io",
            pool=POOL,
            device=d,
            share_id=f"{name}-share" if shares is not None else None,
            consumed_capacity=shares,
        )
        for d in devices
    ]
    c = with_allocation(
        claim(name, exact("gpu", "mig-1g")),
        V1AllocationResult(devices=V1DeviceAllocationResult(results=results)),
    )
    if ours:
        meta(c).annotations = {ALLOCATED_BY: ALLOCATED_BY_US}
    if reserved:
        status_of(c).reserved_for = [V1ResourceClaimConsumerReference(resource="pods", name="p", uid="u")]
    return c


def verdict(
    target: ResourceV1ResourceClaim, *others: ResourceV1ResourceClaim, sharing: bool = False
) -> str | None:
    pools = gather_pools(a30_pool(sharing=("ts",) if sharing else ()), node=None)
    return must_yield(target, allocated=[target, *others], pools=pools, ours=is_ours)


def test_ours_yields_a_device_the_scheduler_also_gave_out() -> None:
    ours = held("ours", f"{CARD}-mig-1g-0", ours=True)
    theirs = held("theirs", f"{CARD}-mig-1g-0", reserved=True)
    reason = verdict(ours, theirs)
    assert reason == f"device gpu.deckhouse.io/{POOL}/{CARD}-mig-1g-0 is also allocated to default/theirs"


def test_a_reserved_claim_never_yields() -> None:
    ours = held("ours", f"{CARD}-mig-1g-0", ours=True, reserved=True)
    assert verdict(ours, held("theirs", f"{CARD}-mig-1g-0")) is None


def test_a_claim_we_did_not_allocate_never_yields() -> None:
    assert verdict(held("theirs", f"{CARD}-mig-1g-0"), held("ours", f"{CARD}-mig-1g-0", ours=True)) is None


def test_of_two_of_ours_the_newer_yields() -> None:
    older = held("older", f"{CARD}-mig-1g-0", ours=True)
    newer = held("newer", f"{CARD}-mig-1g-0", ours=True)
    meta(older).creation_timestamp = datetime(2026, 1, 1, tzinfo=UTC)
    meta(newer).creation_timestamp = datetime(2026, 1, 2, tzinfo=UTC)
    older = older.model_validate(older.model_dump())
    newer = newer.model_validate(newer.model_dump())
    assert verdict(older, newer) is None
    assert verdict(newer, older) is not None


def test_counters_overcommitted_by_mig_next_to_physical() -> None:
    ours = held("ours", f"{CARD}-mig-2g-0", ours=True)
    theirs = held("theirs", f"{CARD}-physical")
    reason = verdict(ours, theirs)
    assert reason is not None
    assert f"of counter set {CARD} in pool gpu.deckhouse.io/{POOL} is over-committed" in reason


def test_non_overlapping_mig_offers_do_not_collide() -> None:
    assert verdict(held("ours", f"{CARD}-mig-2g-0", ours=True), held("theirs", f"{CARD}-mig-2g-2")) is None


def test_shared_capacity_overcommitted() -> None:
    ours = held("ours", f"{CARD}-ts", ours=True, shares={"sharePercent": "60"})
    theirs = held("theirs", f"{CARD}-ts", shares={"sharePercent": "50"})
    reason = verdict(ours, theirs, sharing=True)
    assert (
        reason
        == f"capacity sharePercent of shared device gpu.deckhouse.io/{POOL}/{CARD}-ts is over-committed"
    )
    fits = held("ours", f"{CARD}-ts", ours=True, shares={"sharePercent": "50"})
    assert verdict(fits, theirs, sharing=True) is None


def test_reconciler_releases_and_then_reallocates_elsewhere(mocker: MockerFixture) -> None:
    e = Env(mocker, a30_pool(), [our_mig_class("1g"), our_physical_class()])
    e.add(held("theirs", f"{CARD}-mig-1g-0", reserved=True))
    ours = e.add(held("ours", f"{CARD}-mig-1g-0", ours=True))
    assert e.reconcile(ours) == Result(requeue=True)
    stored = e.stored(ours)
    assert status_of(stored).allocation is None
    assert ALLOCATED_BY not in annotations_of(stored)
    [(kind, reason, message)] = e.events()
    assert (kind, reason) == ("Warning", "Reallocating")
    assert "is also allocated to default/theirs" in message
    e.sync()
    assert e.reconcile(ours) == Result()
    results = allocation_results(e.stored(ours))
    assert [r.device for r in results] != [f"{CARD}-mig-1g-0"]


def test_reconciler_leaves_a_collision_between_claims_it_must_not_touch(mocker: MockerFixture) -> None:
    e = Env(mocker, a30_pool(), [our_mig_class("1g")])
    e.add(held("a", f"{CARD}-mig-1g-0"))
    b = e.add(held("b", f"{CARD}-mig-1g-0"))
    assert e.reconcile(b) == Result()
    assert e.api.writes == []
