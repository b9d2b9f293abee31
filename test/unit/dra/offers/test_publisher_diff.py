"""Content comparison of slices: generation left out, quantities canonical, owners counted."""

from __future__ import annotations

from kubernetes.client import V1OwnerReference, V1ResourceSlice
from testutil.k8s_fields import counter_sets, slice_devices
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.model.offers import build_offers
from pkg.dra.model.slices import Layout, build_slices
from pkg.dra.publisher import content, dropped_fields, slice_changes


def a30_slices(generation: int = 1, owner: V1OwnerReference | None = None) -> list[V1ResourceSlice]:
    return build_slices(
        node="n",
        cards=[build_offers(card("A30"))],
        generation=generation,
        layout=Layout.SEPARATE,
        owner=owner,
    )


def test_generation_is_not_content_but_owners_are() -> None:
    assert content(a30_slices(1)[1]) == content(a30_slices(7)[1])
    owner = V1OwnerReference(api_version="v1", kind="Node", name="n", uid="u")
    assert content(a30_slices(1, owner=owner)[1]) != content(a30_slices(1)[1])


def test_quantities_compare_by_value() -> None:
    ours = a30_slices()[0]
    stored = ours.model_copy(deep=True)
    counter_sets(stored)[0].counters["memory"].value = "24576Mi"
    assert content(stored) == content(ours)
    counter_sets(stored)[0].counters["memory"].value = "24577Mi"
    assert content(stored) != content(ours)


def test_dropped_fields_names_the_missing_paths() -> None:
    sent = a30_slices()[1]
    stored = sent.model_copy(deep=True)
    assert dropped_fields(sent, stored) == []
    for device in slice_devices(stored):
        device.allow_multiple_allocations = None
    slice_devices(stored)[0].consumes_counters = None
    assert dropped_fields(sent, stored) == [
        "spec.devices[0].consumesCounters",
        "spec.devices[13].allowMultipleAllocations",
        "spec.devices[14].allowMultipleAllocations",
    ]


def test_slice_changes_keep_an_equal_pool_and_bumps_a_changed_one() -> None:
    existing = a30_slices(4)
    same = slice_changes(pool="gpus/n", existing=existing, desired_at=a30_slices)
    assert same.unchanged
    assert same.generation == 4
    fewer = slice_changes(pool="gpus/n", existing=existing[:1], desired_at=a30_slices)
    assert fewer.generation == 5
    assert [rs.spec.pool.generation for rs in fewer.apply] == [5, 5]
    first = slice_changes(pool="gpus/n", existing=[], desired_at=a30_slices)
    assert first.generation == 1
