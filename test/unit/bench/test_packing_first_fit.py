"""The offer-order search's pieces (``test/bench``): its workloads, and its first-fit simulation,
which must agree with our allocator in the scheduler's order — the search optimises the
simulation, table 2 measures the allocator and the real scheduler."""

from __future__ import annotations

import pytest
from bench.packing_bench import ORDERS, Bench, in_process, mixed, simulated
from bench.packing_workloads import BENCH, WORKLOADS, Workload
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.allocator import FirstFit


def test_the_bench_workload_is_the_sequence_table_2_always_used() -> None:
    # Seed 1's first events, as table 2's figures before the search were measured on.
    events = BENCH.sequence(1)
    assert [(e.index, e.size, e.release) for e in events[:4]] == [
        (0, "1g", None),
        (1, "3g", None),
        (-1, "", 1),
        (2, "2g", None),
    ]


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_a_release_names_a_live_arrival_and_sizes_follow_the_mix(w: Workload) -> None:
    live: set[int] = set()
    for e in w.sequence(7):
        if e.release is None:
            assert e.size in dict(w.weights)
            live.add(e.index)
        else:
            live.remove(e.release)
    if w.release_rate == 0:
        assert all(e.release is None for e in w.sequence(7))


def test_a_workload_on_fewer_sizes_keeps_only_those() -> None:
    on_a30 = BENCH.on(frozenset({"1g", "2g", "4g"}))
    assert on_a30 is not None
    assert on_a30.weights == (("1g", 40), ("2g", 25), ("4g", 10))
    assert BENCH.on(frozenset({"5g"})) is None


@pytest.mark.parametrize("order", ORDERS)
def test_the_simulation_agrees_with_the_allocators_first_fit(order: str) -> None:
    bench = mixed()
    for seed in (1, 2, 3):
        events = bench.sequence(seed)
        assert simulated(bench, events, order) == in_process(FirstFit(), bench, events, order)


def test_the_simulation_agrees_on_one_model_alone() -> None:
    workload = BENCH.on(frozenset({"1g", "2g", "4g"}))
    assert workload is not None
    a30 = Bench("A30", (card("A30", "0000:01:00.0"), card("A30", "0000:02:00.0")), workload)
    for seed in (1, 2):
        events = a30.sequence(seed)
        assert simulated(a30, events, "searched") == in_process(FirstFit(), a30, events, "searched")
