"""``gpu_dra_claim_allocations_total`` from the caches, and the failure reasons."""

from __future__ import annotations

from kubernetes.client import V1AllocationResult, V1DeviceAllocationResult, V1DeviceRequestAllocationResult
from prometheus_client import CollectorRegistry, generate_latest
from testutil.unit.dra.allocator.alloc_builders import (
    a30_pool,
    claim,
    exact,
    first_available,
    with_allocation,
)

from pkg.dra.model import Unschedulable, UnschedulableKind
from pkg.dracontroller.accounting.index_cache import DeviceIndexCache
from pkg.dracontroller.internal.handler.allocate import failure_reason
from pkg.dracontroller.metrics import AllocationCollector

CARD = "gpu-0000-02-00-0"
POOL = f"gpus-node-a-{CARD}"


def result(request: str, device: str, driver: str = "gpu.deckhouse.io") -> V1DeviceRequestAllocationResult:
    return V1DeviceRequestAllocationResult(request=request, driver=driver, pool=POOL, device=device)


def test_allocated_devices_by_class_type_and_node() -> None:
    mig = with_allocation(
        claim("a", exact("gpu", "mig-1g", count=2)),
        V1AllocationResult(
            devices=V1DeviceAllocationResult(
                results=[result("gpu", f"{CARD}-mig-1g-0"), result("gpu", f"{CARD}-mig-1g-1")]
            )
        ),
    )
    sub = with_allocation(
        claim("b", first_available("gpu", ("whole", "physical"), ("part", "mig-2g"))),
        V1AllocationResult(
            devices=V1DeviceAllocationResult(results=[result("gpu/part", f"{CARD}-mig-2g-2")])
        ),
    )
    foreign = with_allocation(
        claim("c", exact("gpu", "other")),
        V1AllocationResult(devices=V1DeviceAllocationResult(results=[result("gpu", "x", driver="other.io")])),
    )
    pending = claim("d", exact("gpu", "mig-1g"))
    registry = CollectorRegistry()
    slices = a30_pool()
    registry.register(
        AllocationCollector(
            claims=lambda: [mig, sub, foreign, pending],
            devices=DeviceIndexCache(
                slices=lambda: slices, physical_gpus=list, driver="gpu.deckhouse.io"
            ).index,
            driver="gpu.deckhouse.io",
        )
    )
    text = generate_latest(registry).decode()
    assert 'gpu_dra_claim_allocations_total{class="mig-1g",deviceType="MIG",node="node-a"} 2.0' in text
    assert 'gpu_dra_claim_allocations_total{class="mig-2g",deviceType="MIG",node="node-a"} 1.0' in text
    assert "other" not in text


def test_failure_reasons() -> None:
    assert failure_reason(Unschedulable("cannot allocate all claims")) == "unschedulable"
    assert failure_reason(Unschedulable("device selector failed", fatal=True)) == "invalid"
    assert (
        failure_reason(Unschedulable("a resource pool is not ready", kind=UnschedulableKind.POOL_NOT_READY))
        == "pool-not-ready"
    )
    assert (
        failure_reason(
            Unschedulable("search gave up after 5 tried devices", kind=UnschedulableKind.SEARCH_LIMIT)
        )
        == "search-limit"
    )


def test_the_allocator_states_the_kind_of_a_failure() -> None:
    """The metric label comes from the allocator's typed kind, not from the start of its message."""
    from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact, mig_class

    from pkg.dra.allocator import Allocator

    too_many = claim("big", exact("r", "mig-1g", count=8))  # an A30 has four 1g placements
    outcome = Allocator().allocate(
        too_many, slices=a30_pool(), classes=[mig_class("1g")], allocated_claims=[], namespace_labels={}
    )
    assert isinstance(outcome, Unschedulable)
    assert (outcome.kind, failure_reason(outcome)) == (UnschedulableKind.UNSCHEDULABLE, "unschedulable")
    gave_up = Allocator(max_steps=1).allocate(
        too_many, slices=a30_pool(), classes=[mig_class("1g")], allocated_claims=[], namespace_labels={}
    )
    assert isinstance(gave_up, Unschedulable)
    assert (gave_up.kind, failure_reason(gave_up)) == (UnschedulableKind.SEARCH_LIMIT, "search-limit")
