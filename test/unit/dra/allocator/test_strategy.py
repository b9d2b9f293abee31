"""Best fit packs cards; first fit reproduces the scheduler's order."""

from __future__ import annotations

import random

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ResourceSlice,
)
from testutil.k8s_fields import counter_sets, name_of, slice_devices
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    claim,
    device,
    devices_of,
    exact,
    explained,
    mig_class,
    node,
    physical_class,
    with_allocation,
)

from pkg.dra.allocator import AllocationInputs, BestFit
from pkg.dra.allocator.context import AllocationContext
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.requests import Alternative
from pkg.dra.allocator.strategy import CandidateStream

A, B = "gpu-0000-02-00-0", "gpu-0000-03-00-0"


def holding(*devices: str) -> ResourceV1ResourceClaim:
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
    for counter_set in counter_sets(large[0]):
        counter_set.counters |= {
            "memory-slice-4": counter_set.counters["memory-slice-0"],
            "memory-slice-5": counter_set.counters["memory-slice-0"],
        }
    cluster = Cluster(large + small, [mig_class("1g")])
    assert cluster.take("mig-1g")[0].startswith(B)


def test_explain_names_the_exhausted_counter() -> None:
    cluster = Cluster(a30_pool(card=A), [mig_class()])
    cluster.claims.append(holding(f"{A}-mig-1g-3"))

    trace = explained(
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


def _interleaved_pool() -> list[V1ResourceSlice]:
    """Two cards in one pool whose devices are not one block each: the lazy order must not assume
    blocks. A's 1g offers come first, then all of B, then the rest of A: by first device A ranks
    before B, by first 2g offer B does."""
    a, b = a30_pool("node-c", card=A), a30_pool("node-c", card=B)
    counters, devices = a[0], a[1]
    counters.spec.shared_counters = counter_sets(counters) + counter_sets(b[0])
    first, rest = slice_devices(a[1])[:4], slice_devices(a[1])[4:]
    loose = device("no-counters", attributes={"deviceType": "MIG", "migProfile": "1g"})
    devices.spec.devices = [*first, *slice_devices(b[1]), loose, *rest]
    for rs in (counters, devices):
        rs.spec.pool.name = "interleaved"
    return [counters, devices]


def _multi_set_pool() -> list[V1ResourceSlice]:
    """Two cards in one pool and a device on both counter sets: charging it changes the other card."""
    a, b = a30_pool("node-d", card=A), a30_pool("node-d", card=B)
    counters, devices = a[0], a[1]
    counters.spec.shared_counters = counter_sets(counters) + counter_sets(b[0])
    bridge = device(
        "bridge",
        attributes={"deviceType": "MIG", "migProfile": "1g"},
        consumes={A: {"memory-slice-0": "1"}, B: {"memory-slice-3": "1"}},
    )
    devices.spec.devices = [*slice_devices(a[1]), bridge, *slice_devices(b[1])]
    for rs in (counters, devices):
        rs.spec.pool.name = "bridged"
    return [counters, devices]


def test_lazy_search_order_equals_the_eager_ranking() -> None:
    """The order the search consumes (lazy, per card) is the order ``explain`` lists (eager), in
    every state a seeded stream of allocations and releases goes through."""
    slices = [
        *a30_pool("node-a", card=A, sharing=("ts",)),
        *a30_pool("node-a", card=B),
        *a30_pool("node-b", card=A, sharing=("ts",)),
        *_interleaved_pool(),
        *_multi_set_pool(),
    ]
    classes = [mig_class(), mig_class("1g"), mig_class("2g"), physical_class(), physical_class("ts")]
    names = [name_of(c) for c in classes]
    cluster = Cluster(slices, classes)
    rng = random.Random(17)
    compared = 0
    for step in range(120):
        if cluster.claims and rng.random() < 0.3:
            cluster.claims.pop(rng.randrange(len(cluster.claims)))
        for cls in names:
            for where in (None, node("node-a")):
                probe = claim(
                    f"probe-{step}-{cls}",
                    exact("r", cls, capacity={"sharePercent": "30"} if "ts" in cls else None),
                )
                inputs = AllocationInputs.of(
                    slices=slices, classes=classes, allocated_claims=cluster.claims, node=where
                )
                ctx = cluster.allocator.context(probe, inputs)
                alt = ctx.plans[0].alternatives[0]
                eager = BestFit().order(ctx.eligible(alt), counters=ctx.counters, fits=ctx.fits_counters)
                stream = BestFit().search_order(ctx, alt)
                lazy: list[Candidate] = []
                while stream.has(len(lazy)):
                    lazy.append(stream[len(lazy)])
                assert [c.id for c in lazy] == [c.id for c in eager], (step, cls, where)
                compared += 1
        cls = rng.choice(names)
        cluster.allocate(
            claim(f"c{step}", exact("r", cls, capacity={"sharePercent": "30"} if "ts" in cls else None)),
            node=None,
        )
    assert compared == 120 * len(names) * 2
    assert len(cluster.claims) > 3  # the states were not all empty


class _EagerBestFit(BestFit):
    """Best fit with the whole order ranked up front, as ``explain`` ranks it."""

    def search_order(self, ctx: AllocationContext, alt: Alternative) -> CandidateStream:
        return CandidateStream.of(
            self.order(ctx.eligible(alt), counters=ctx.counters, fits=ctx.fits_counters)
        )


def test_lazy_and_eager_best_fit_decide_alike_while_the_search_charges_cards() -> None:
    """Counters change during a search (several devices, several requests): a card reached later
    must be ranked as it was when the order was taken — also on a pool where one device charges
    two cards."""
    slices = [*a30_pool("node-a", card=A), *a30_pool("node-a", card=B), *_multi_set_pool()]
    classes = [mig_class(), mig_class("1g"), mig_class("2g")]
    lazy, eager = Cluster(slices, classes), Cluster(slices, classes)
    eager.allocator.strategy = _EagerBestFit()
    rng = random.Random(5)
    for step in range(150):
        if lazy.claims and rng.random() < 0.35:
            drop = rng.randrange(len(lazy.claims))
            lazy.claims.pop(drop)
            eager.claims.pop(drop)
        requests = [
            exact(f"r{i}", rng.choice(["mig-any", "mig-1g", "mig-2g"]), count=rng.choice([1, 2, 3, 5, 6]))
            for i in range(rng.choice([1, 2]))
        ]
        got = lazy.allocate(claim(f"c{step}", *requests), node=None)
        want = eager.allocate(claim(f"c{step}", *requests), node=None)
        assert isinstance(got, V1AllocationResult) == isinstance(want, V1AllocationResult), step
        if isinstance(got, V1AllocationResult):
            assert devices_of(got) == devices_of(want), step
