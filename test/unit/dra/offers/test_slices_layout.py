"""Slice layout: 1.35+ counter slices apart from device slices of at most 64, 1.34 inline."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1OwnerReference, V1ResourceSlice
from testutil.k8s_fields import consumption_of, counter_sets, meta, name_of, slice_devices
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.model.offers import CardOffers, build_offers
from pkg.dra.model.slices import (
    Layout,
    ServerVersion,
    UnsupportedServerError,
    build_slices,
    read_server_version,
    slice_name_base,
)


def cards(model: str, count: int) -> list[CardOffers]:
    # Deliberately out of PCI order: the layout sorts by address.
    return [build_offers(card(model, f"0000:{0x10 * (i + 1):02x}:00.0")) for i in reversed(range(count))]


def devices(rs: V1ResourceSlice) -> list[str]:
    return [d.name for d in rs.spec.devices or []]


def test_eight_h100_cards_split_into_device_slices_of_whole_cards() -> None:
    slices = build_slices(node="node-a", cards=cards("H100", 8), generation=3, layout=Layout.SEPARATE)
    names = [name_of(rs) for rs in slices]
    assert names == ["gpu-node-a-counters-00", *(f"gpu-node-a-devices-0{i}" for i in range(4))]
    assert names == sorted(names)
    counter_slice, *device_slices = slices
    assert counter_slice.spec.devices is None
    assert [s.name for s in counter_sets(counter_slice)] == [
        f"gpu-0000-{0x10 * (i + 1):02x}-00-0" for i in range(8)
    ]
    for rs in slices:
        assert rs.spec.pool.name == "gpus/node-a"
        assert rs.spec.pool.generation == 3
        assert rs.spec.pool.resource_slice_count == 5
        assert rs.spec.node_name == "node-a"
        assert rs.spec.driver == "gpu.deckhouse.io"
    for rs in device_slices:
        assert rs.spec.shared_counters is None
        assert len(slice_devices(rs)) == 56  # two cards of 28 offers; a third would pass 64
        sets = {u.counter_set for d in slice_devices(rs) for u in consumption_of(d)}
        assert len(sets) == 2
    # Card order follows the PCI address, and a card's offers stay together and in order.
    order = [d for rs in device_slices for d in devices(rs)]
    assert order == [
        o.name for c in sorted(cards("H100", 8), key=lambda c: c.card.pci_address) for o in c.offers
    ]


def test_mixed_cards_start_a_new_slice_when_64_would_be_passed() -> None:
    mixed = [*cards("A30", 3), build_offers(card("H100", "0000:ff:00.0"))]
    slices = build_slices(node="n", cards=mixed, generation=1, layout=Layout.SEPARATE)
    assert [len(rs.spec.devices or []) for rs in slices] == [0, 3 * 16, 28]


def test_more_than_eight_cards_need_a_second_counter_slice() -> None:
    slices = build_slices(node="n", cards=cards("L4", 9), generation=1, layout=Layout.SEPARATE)
    assert [name_of(rs) for rs in slices] == [
        "gpu-n-counters-00",
        "gpu-n-counters-01",
        "gpu-n-devices-00",
    ]
    assert [len(rs.spec.shared_counters or []) for rs in slices] == [8, 1, 0]


@pytest.mark.parametrize(("model", "per_slice"), [("H100", 2), ("A30", 3), ("L4", 8)])
def test_inline_layout_keeps_counter_sets_beside_their_devices(model: str, per_slice: int) -> None:
    slices = build_slices(node="n", cards=cards(model, 8), generation=1, layout=Layout.INLINE)
    assert all(name_of(rs).startswith("gpu-n-devices-") for rs in slices)
    assert [len(counter_sets(rs)) for rs in slices[:-1]] == [per_slice] * (len(slices) - 1)
    assert sum(len(counter_sets(rs)) for rs in slices) == 8
    for rs in slices:
        assert rs.spec.pool.resource_slice_count == len(slices)
        sets = {s.name for s in counter_sets(rs)}
        assert {u.counter_set for d in slice_devices(rs) for u in consumption_of(d)} == sets
        assert sum(len(s.counters) for s in counter_sets(rs)) <= 32


def test_no_cards_no_slices() -> None:
    assert build_slices(node="n", cards=[], generation=1, layout=Layout.SEPARATE) == []


def test_owner_reference_is_set_on_every_slice() -> None:
    owner = V1OwnerReference(api_version="v1", kind="Node", name="n", uid="u-1", controller=True)
    slices = build_slices(node="n", cards=cards("A30", 1), generation=1, layout=Layout.SEPARATE, owner=owner)
    assert all(meta(rs).owner_references == [owner] for rs in slices)


def test_long_node_names_keep_slice_names_valid_and_distinct() -> None:
    long_a, long_b = "a" * 250, "a" * 249 + "b"
    assert slice_name_base("node-a") == "gpu-node-a"
    base_a, base_b = slice_name_base(long_a), slice_name_base(long_b)
    assert base_a != base_b
    assert len(base_a + "-counters-000") <= 253
    assert slice_name_base(long_a) == base_a


@pytest.mark.parametrize(
    ("info", "version", "layout"),
    [
        ({"major": "1", "minor": "34"}, ServerVersion(1, 34), Layout.INLINE),
        ({"major": "1", "minor": "35+"}, ServerVersion(1, 35), Layout.SEPARATE),
        ({"major": "1", "minor": "37", "gitVersion": "v1.37.1"}, ServerVersion(1, 37), Layout.SEPARATE),
    ],
)
def test_server_version_chooses_the_layout(
    info: dict[str, str], version: ServerVersion, layout: Layout
) -> None:
    assert ServerVersion.from_version_info(info) == version
    assert version.layout is layout


def test_old_or_unreadable_servers_are_refused() -> None:
    with pytest.raises(UnsupportedServerError, match=r"older than 1\.34"):
        _ = ServerVersion(1, 33).layout
    with pytest.raises(UnsupportedServerError, match="cannot read"):
        ServerVersion.from_version_info({"major": "", "minor": "x"})


def test_read_server_version_asks_slash_version() -> None:
    calls: list[tuple[str, str]] = []

    class Client:
        def raw(self, method: str, path: str) -> Any:
            calls.append((method, path))
            return {"major": "1", "minor": "36"}

    assert read_server_version(Client()) == ServerVersion(1, 36)
    assert calls == [("GET", "/version")]
