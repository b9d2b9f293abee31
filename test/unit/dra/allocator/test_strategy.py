"""Best fit packs cards; first fit reproduces the scheduler's order."""

from __future__ import annotations

from alloc_builders import Cluster, a30_pool, claim, devices_of, exact, mig_class, with_allocation
from kubernetes.client import V1AllocationResult, V1DeviceAllocationResult, V1DeviceRequestAllocationResult

from pkg.dra.allocator import explain

A, B = "gpu-0000-02-00-0", "gpu-0000-03-00-0"


def holding(*devices: str) -> object:
    """A claim that already holds the given devices of the cards above."""
    results = [
        V1DeviceRequestAllocationResult(
            request="r", driver="gpu.deckhouse.io", pool=f"gpus-node-a-{d.split('-mig')[0]}", device=d
        )
        for d in devices
    ]
    return with_allocation(
        claim("held", exact("r", "mig-1g")),
        V1AllocationResult(devices=V1DeviceAllocationResult(results=results)),
    )


def test_partly_used_card_is_filled_first() -> None:
    cluster = Cluster(a30_pool(card=A) + a30_pool(card=B), [mig_class("1g")])
    cluster.claims.append(holding(f"{B}-mig-1g-0"))
    assert cluster.take("mig-1g")[0].startswith(B)


def test_first_fit_takes_the_first_card_in_name_order() -> None:
    cluster = Cluster(a30_pool(card=A) + a30_pool(card=B), [mig_class("1g")], first_fit=True)
    cluster.claims.append(holding(f"{B}-mig-1g-0"))
    assert cluster.take("mig-1g") == [f"{A}-mig-1g-0"]


def test_a30_with_slice_3_taken_puts_1g_on_slice_2() -> None:
    cluster = Cluster(a30_pool(card=A), [mig_class("1g"), mig_class("2g")])
    cluster.claims.append(holding(f"{A}-mig-1g-3"))
    assert cluster.take("mig-1g") == [f"{A}-mig-1g-2"]
    assert cluster.take("mig-2g") == [f"{A}-mig-2g-0"]  # slices 0-1 stayed free for it


def test_first_fit_fragments_the_same_card() -> None:
    cluster = Cluster(a30_pool(card=A), [mig_class("1g"), mig_class("2g")], first_fit=True)
    cluster.claims.append(holding(f"{A}-mig-1g-3"))
    assert cluster.take("mig-1g") == [f"{A}-mig-1g-0"]
    assert not isinstance(cluster.allocate(claim("2g", exact("r", "mig-2g"))), V1AllocationResult)


def test_smaller_free_card_before_larger_free_card() -> None:
    small = a30_pool(card=B)
    large = a30_pool(card=A)
    # Make A look larger: two more memory slices that no offer uses.
    for counter_set in large[0].spec.shared_counters:
        counter_set.counters |= {
            "memory-slice-4": counter_set.counters["memory-slice-0"],
            "memory-slice-5": counter_set.counters["memory-slice-0"],
        }
    cluster = Cluster(large + small, [mig_class("1g")])
    assert cluster.take("mig-1g")[0].startswith(B)


def test_explain_names_the_exhausted_counter() -> None:
    cluster = Cluster(a30_pool(card=A), [mig_class()])
    cluster.claims.append(holding(f"{A}-mig-1g-3"))

    trace = explain(
        claim("c", exact("r", "mig-any")),
        slices=cluster.slices,
        classes=cluster.classes,
        allocated_claims=cluster.claims,
    )

    verdicts = trace.requests[0].devices
    by_device = {v.device.rsplit("/", 1)[1]: v for v in verdicts}
    assert by_device[f"{A}-mig-1g-3"].reason == "already allocated"
    blocked = by_device[f"{A}-mig-2g-2"]
    assert (blocked.reason, blocked.counter_set, blocked.counter) == (
        "counters exhausted",
        A,
        "memory-slice-3",
    )
    assert by_device[f"{A}-physical"].reason == "selector false"
    assert (verdicts[0].reason, verdicts[0].device.rsplit("/", 1)[1]) == ("fits", f"{A}-mig-1g-2")
    assert devices_of(trace.outcome) == [f"{A}-mig-1g-2"]
