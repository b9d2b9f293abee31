"""The fill-following order: a node's devices ranked by what is in use, as best fit would pick."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import cast

from kubernetes.client import V1Device, V1ResourceSlice
from testutil.unit.dra.offers.fake_slice_server import FakeSliceServer
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.model.card import Card
from pkg.dra.model.offer_order import node_order
from pkg.dra.model.offers import CardOffers, build_offers
from pkg.dra.model.slices import Layout, build_slices
from pkg.dra.publisher import SlicePublisher
from pkg.framework.client import KubeClient

NODE = "node-fill"
A = "gpu.deckhouse.io"


def cards(*models: tuple[str, str]) -> list[CardOffers]:
    return [build_offers(card(model, pci)) for model, pci in models]


def devices(slices: list[V1ResourceSlice]) -> list[V1Device]:
    """The devices in the scheduler's order: slices by name, devices as listed."""
    ordered = sorted(slices, key=lambda rs: str(rs.metadata.name if rs.metadata else ""))
    return [d for rs in ordered for d in rs.spec.devices or ()]


def first(
    slices: list[V1ResourceSlice],
    profile_prefix: str,
    offers: Sequence[CardOffers] = (),
    in_use: Sequence[str] = (),
) -> tuple[str, int]:
    """The card and placement start of the first MIG device of a size that fits next to the
    devices ``in_use``: what the scheduler's first fit takes."""
    taken = {
        (c.card.base_name, s)
        for c in offers
        for o in c.offers
        if o.name in in_use and o.placement is not None
        for s in o.placement.slices
    }
    placements = {o.name: o.placement for c in offers for o in c.offers}
    for d in devices(slices):
        attrs = d.attributes or {}
        profile = attrs.get(f"{A}/migProfile")
        placement = placements.get(d.name)
        if placement is not None and any((card_of(d), s) in taken for s in placement.slices):
            continue
        if profile is not None and str(profile.string).startswith(profile_prefix):
            return card_of(d), int(attrs[f"{A}/placementStart"].int or 0)
    raise AssertionError(f"no {profile_prefix} device")


def card_of(device: V1Device) -> str:
    """The card a device is on: the counter set it consumes (named like the card)."""
    return str((device.consumes_counters or [])[0].counter_set)


def mig_name(offers: CardOffers, profile: str, start: int) -> str:
    for o in offers.offers:
        if (
            o.profile is not None
            and o.placement is not None
            and (o.profile.name, o.placement.start)
            == (
                profile,
                start,
            )
        ):
            return o.name
    raise AssertionError(f"no {profile}@{start}")


MIXED = (("A30", "0000:18:00.0"), ("A30", "0000:5d:00.0"), ("A100-40GB", "0000:9a:00.0"))
"""Two A30 and an A100: only a node of more than one MIG model follows the fill."""


def publish(offers: list[CardOffers], in_use: list[str] | None) -> list[V1ResourceSlice]:
    return build_slices(node=NODE, cards=offers, generation=1, layout=Layout.SEPARATE, in_use=in_use)


def test_a_small_request_goes_to_the_partly_used_card_first() -> None:
    offers = cards(*MIXED)
    assert first(publish(offers, []), "1g.")[0] == "gpu-0000-18-00-0"
    used = [mig_name(offers[1], "1g.6gb", 3)]
    bus, start = first(publish(offers, used), "1g.", offers, used)
    assert bus == "gpu-0000-5d-00-0"
    assert start == 2, "next to the used slice, keeping 0-1 free for a 2g"


def test_the_order_follows_releases_back() -> None:
    offers = cards(*MIXED)
    assert devices(publish(offers, [mig_name(offers[1], "1g.6gb", 3)])) != devices(publish(offers, []))
    assert [d.name for d in devices(publish(offers, []))] == [d.name for d in devices(publish(offers, []))]


def test_only_the_order_changes_never_a_name_or_capacity() -> None:
    offers = cards(("H100", "0000:18:00.0"), ("A100-40GB", "0000:2a:00.0"), ("A30", "0000:3a:00.0"))
    static = {
        d.name: d
        for d in devices(build_slices(node=NODE, cards=offers, generation=1, layout=Layout.SEPARATE))
    }
    used = [mig_name(offers[0], "3g.40gb", 4), mig_name(offers[2], "2g.12gb", 0)]
    filled = {d.name: d for d in devices(publish(offers, used))}
    assert filled == static


def test_with_nothing_in_use_small_cards_come_first_as_in_the_static_node_order() -> None:
    offers = cards(("H100", "0000:18:00.0"), ("A30", "0000:3a:00.0"), ("A100-40GB", "0000:2a:00.0"))
    static: list[Card] = node_order([c.card for c in offers])
    filled = publish(offers, [])
    seen: list[str] = []
    for d in devices(filled):
        bus = card_of(d)
        if bus not in seen:
            seen.append(bus)
    assert seen == [c.base_name for c in static]


def test_an_unchanged_order_writes_nothing_and_a_changed_one_writes_once() -> None:
    server = FakeSliceServer()
    pub = SlicePublisher(kube=cast(KubeClient, server), reader=server, layout=Layout.SEPARATE)
    offers = cards(*MIXED)
    first_result = pub.publish(NODE, offers, in_use=[])
    server.writes.clear()
    assert not pub.publish(NODE, offers, in_use=[]).changed
    assert server.writes == []
    used = [mig_name(offers[1], "1g.6gb", 3)]
    changed = pub.publish(NODE, offers, in_use=used)
    assert changed.changed
    assert changed.generation == first_result.generation + 1
    server.writes.clear()
    # The same devices in use again (a resync, or a Prepare of a device of another pool): no write.
    assert not pub.publish(NODE, offers, in_use=used).changed
    assert server.writes == []


def test_a_card_without_mig_offers_stays_before_the_partitionable_ones() -> None:
    offers = [
        build_offers(card("A30", "0000:18:00.0")),
        build_offers(dataclasses.replace(card("H100", "0000:5d:00.0"), mig_allowed=False)),
    ]
    used = [mig_name(offers[0], "1g.6gb", 3)]
    seen: list[str] = []
    for d in devices(publish(offers, used)):
        if card_of(d) not in seen:
            seen.append(card_of(d))
    assert seen == ["gpu-0000-5d-00-0", "gpu-0000-18-00-0"]


def test_a_node_of_one_model_keeps_the_static_order_whatever_is_in_use() -> None:
    two_a30 = (("A30", "0000:18:00.0"), ("A30", "0000:5d:00.0"))
    for models in (two_a30, (("H100", "0000:18:00.0"), ("H100", "0000:5d:00.0"))):
        offers = cards(*models)
        static = [
            d.name
            for d in devices(build_slices(node=NODE, cards=offers, generation=1, layout=Layout.SEPARATE))
        ]
        used = [
            o.name for o in offers[-1].offers if o.profile is not None and o.profile.name.startswith("1g.")
        ][:1]
        assert used
        assert [d.name for d in devices(publish(offers, used))] == static
