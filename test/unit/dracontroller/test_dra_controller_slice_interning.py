"""Cached slices share their repeated values and still say exactly what the API server sent."""

from __future__ import annotations

from typing import Any

from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import our_mig_class

from pkg.dra.allocator import AllocationInputs, Allocator
from pkg.dracontroller.internal.slice_interning import SliceInterner
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE


def decoded(slices: list[Any]) -> list[Any]:
    """As the informer receives them: freshly decoded from the API's JSON."""
    return [RESOURCE_SLICE.decode(RESOURCE_SLICE.encode(rs)) for rs in slices]


def devices(slices: list[Any]) -> list[Any]:
    return [device for rs in slices for device in (rs.spec.devices or ())]


def test_repeated_values_are_one_instance_and_every_slice_reads_the_same() -> None:
    sent = [*a30_pool("node-a"), *a30_pool("node-b", card="gpu-0000-03-00-0")]
    interner = SliceInterner()
    cached = [interner(rs) for rs in decoded(sent)]
    assert [RESOURCE_SLICE.encode(rs) for rs in cached] == [RESOURCE_SLICE.encode(rs) for rs in sent]
    mig = [d for d in devices(cached) if d.attributes["deviceType"].string == "MIG"]
    assert len(mig) > 2
    assert len({id(d.attributes["deviceType"]) for d in mig}) == 1  # on both nodes: one instance
    same_offer = [d.consumes_counters[0] for d in mig if d.name.endswith("mig-1g-0")]
    assert len(same_offer) == 2
    assert same_offer[0].counter_set != same_offer[1].counter_set  # different cards: not merged


def test_decisions_on_interned_slices_are_the_decisions_on_the_slices_sent() -> None:
    sent = [*a30_pool("node-a"), *a30_pool("node-b")]
    interner = SliceInterner()
    classes = [our_mig_class("1g")]
    c = claim("c", exact("gpu", "mig-1g"))

    def decide(slices: list[Any]) -> Any:
        inputs = AllocationInputs.of(slices=slices, classes=classes, allocated_claims=[], namespace_labels={})
        return Allocator(share_id=lambda: "s").attempt(c, inputs).outcome

    assert decide([interner(rs) for rs in decoded(sent)]) == decide(decoded(sent))


def test_the_table_is_emptied_past_its_bound() -> None:
    interner = SliceInterner(max_values=5)
    for rs in decoded(a30_pool("node-a")):
        interner(rs)
    assert len(interner) > 5
    interner(decoded(a30_pool("node-b"))[0])  # past the bound: emptied first, then filled again
    assert len(interner) < 40
