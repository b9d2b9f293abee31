"""Best fit's topology tie-break (``pkg/dra/allocator/topology.py``) on a synthetic node of equal cards.

Each card is one whole-card device consuming its own counter set, so best fit ranks all free cards
equal and only the tie-break and first-fit order decide.
"""

from __future__ import annotations

import pytest
from kubernetes.client import V1ResourceSlice
from testutil.k8s_fields import allocation_results
from testutil.unit.dra.allocator.alloc_builders import (
    DRIVER,
    allocated,
    claim,
    device,
    device_class,
    exact,
    resource_slice,
)

from pkg.dra.allocator import Allocator, FirstFit

PCIE_ROOT, NVLINK = "resource.kubernetes.io/pcieRoot", f"{DRIVER}/nvlinkDomain"
CLASS = device_class("whole", f'device.driver == "{DRIVER}"')


def node(cards: list[dict[str, str]]) -> V1ResourceSlice:
    """One card per entry (its topology attributes), named ``c0``, ``c1``, … in first-fit order."""
    counters = {f"set-{i}": {"memory": "1"} for i in range(len(cards))}
    devices = [
        device(f"c{i}", attributes=dict(attrs), consumes={f"set-{i}": {"memory": "1"}})
        for i, attrs in enumerate(cards)
    ]
    return resource_slice("s", pool="p", devices=devices, counters=counters)


def chosen(cards: list[dict[str, str]], count: int, allocator: Allocator | None = None) -> list[str]:
    outcome = (allocator or Allocator()).allocate(
        claim("c", exact("gpus", "whole", count=count)),
        slices=[node(cards)],
        classes=[CLASS],
        allocated_claims=[],
    )
    return sorted(str(r.device) for r in allocation_results(allocated(outcome)))


def test_cards_without_topology_keep_first_fit_order() -> None:
    assert chosen([{}, {}, {}, {}], 2) == ["c0", "c1"]


def test_a_request_goes_to_the_smallest_root_that_holds_it() -> None:
    cards = [
        {PCIE_ROOT: "a"},
        {PCIE_ROOT: "b"},
        {PCIE_ROOT: "b"},
        {PCIE_ROOT: "c"},
        {PCIE_ROOT: "c"},
        {PCIE_ROOT: "c"},
    ]
    assert chosen(cards, 2, Allocator(strategy=FirstFit())) == ["c0", "c1"]  # the scheduler's order
    assert chosen(cards, 2) == ["c1", "c2"]  # root b: holds two, the three of c stay together
    assert chosen(cards, 3) == ["c3", "c4", "c5"]


def test_a_request_too_big_for_any_root_takes_the_largest_first() -> None:
    cards = [
        {PCIE_ROOT: "a"},
        {PCIE_ROOT: "b"},
        {PCIE_ROOT: "b"},
        {PCIE_ROOT: "c"},
        {PCIE_ROOT: "c"},
        {PCIE_ROOT: "c"},
    ]
    assert chosen(cards, 4) == ["c1", "c3", "c4", "c5"]  # root c whole, then root b (largest left)


def test_the_nvlink_domain_decides_before_the_root() -> None:
    cards = [
        {NVLINK: "x", PCIE_ROOT: "a"},
        {NVLINK: "y", PCIE_ROOT: "a"},  # a root shared by two domains (a partitioned board)
        {NVLINK: "x", PCIE_ROOT: "b"},
        {NVLINK: "y", PCIE_ROOT: "c"},
        {NVLINK: "y", PCIE_ROOT: "c"},
    ]
    assert chosen(cards, 2) == ["c0", "c2"]  # domain x holds two (smallest), though over two roots
    assert chosen(cards, 3) == ["c1", "c3", "c4"]  # only domain y holds three


@pytest.mark.parametrize("count", [1, 2])
def test_cards_without_the_attribute_come_after_those_with_it(count: int) -> None:
    cards = [{}, {PCIE_ROOT: "a"}, {PCIE_ROOT: "a"}]
    expected = ["c0"] if count == 1 else ["c1", "c2"]  # one device: no regrouping at all
    assert chosen(cards, count) == expected
