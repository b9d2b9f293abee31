"""The published order follows the searched table (``pkg/dra/model/offer_order_table.py``): within a
card the MIG offers in the row's order, across a node's cards the row order under the node rule,
cards without MIG offers first and models without a row last."""

from __future__ import annotations

import dataclasses

import pytest
from bench.packing_order import card_of

from pkg.backends.nvidia.profiles import all_models
from pkg.dra.model.card import Card, Placement
from pkg.dra.model.offer_order import entries, node_order, signature
from pkg.dra.model.offer_order_table import NODE_RULE
from pkg.dra.model.offers import build_offers
from pkg.dra.model.slices import Layout, build_slices


def shipped(key: str, pci: str = "0000:02:00.0") -> Card:
    """A card of a model of the shipped MIG tables, as the NVIDIA backend describes it."""
    return card_of(next(f for f in all_models() if f.key == key), pci)


MODEL_KEYS = sorted({f.key for f in all_models()})


def mig_keys(card: Card) -> list[tuple[str, int]]:
    out = []
    for offer in build_offers(card).offers:
        if offer.profile is not None and offer.placement is not None:
            out.append((offer.profile.name, offer.placement.start))
    return out


@pytest.mark.parametrize("key", MODEL_KEYS)
def test_every_shipped_model_has_a_row(key: str) -> None:
    # A model added to the MIG tables without running the search fails here.
    assert signature(shipped(key)) in entries()


@pytest.mark.parametrize("key", MODEL_KEYS)
def test_a_cards_mig_offers_are_published_in_its_rows_order(key: str) -> None:
    card = shipped(key)
    _, row = entries()[signature(card)]
    assert mig_keys(card) == list(row.offers)


def test_offers_a_row_does_not_list_follow_the_listed_ones() -> None:
    card = shipped("A30_24GB")
    _, row = entries()[signature(card)]
    extra = dataclasses.replace(card.mig_profiles[0], placements=(Placement(9, 1),))
    # Same profile names, so the same row; placement 9 is not in it.
    widened = dataclasses.replace(
        card,
        mig_profiles=tuple(
            dataclasses.replace(p, placements=(*p.placements, *extra.placements))
            if p.name == extra.name
            else p
            for p in card.mig_profiles
        ),
    )
    assert mig_keys(widened) == [*row.offers, (extra.name, 9)]


def test_the_node_order_follows_the_rows_and_the_rule() -> None:
    rank = {key: entries()[signature(shipped(key))][0] for key in MODEL_KEYS}
    by_rank = sorted(rank, key=rank.__getitem__)
    first, second = by_rank[0], by_rank[-1]
    # PCI order puts the later-ranked model first; two cards of each.
    cards = [shipped(second, "0000:01:00.0"), shipped(first, "0000:02:00.0")]
    cards += [shipped(second, "0000:03:00.0"), shipped(first, "0000:04:00.0")]
    order = [c.pci_address[5:7] for c in node_order(cards)]
    if NODE_RULE == "grouped":
        assert order == ["02", "04", "01", "03"]
    else:
        assert order == ["02", "01", "04", "03"]


def test_cards_without_mig_come_first_and_unknown_models_last() -> None:
    a30 = shipped("A30_24GB", "0000:05:00.0")
    no_mig = dataclasses.replace(shipped("A30_24GB", "0000:09:00.0"), mig_allowed=False)
    l4 = dataclasses.replace(a30, pci_address="0000:08:00.0", mig_profiles=())
    unknown_profiles = tuple(dataclasses.replace(p, name=f"x{p.name}") for p in a30.mig_profiles)
    unknown_b = dataclasses.replace(a30, pci_address="0000:01:00.0", mig_profiles=unknown_profiles)
    unknown_a = dataclasses.replace(unknown_b, pci_address="0000:00:00.0")
    order = [c.pci_address[5:7] for c in node_order([a30, no_mig, l4, unknown_b, unknown_a])]
    assert order == ["08", "09", "05", "00", "01"]


def test_the_slices_list_the_cards_in_node_order() -> None:
    cards = [shipped(key, f"0000:{i:02x}:00.0") for i, key in enumerate(MODEL_KEYS)]
    slices = build_slices(
        node="n", cards=[build_offers(c) for c in cards], generation=1, layout=Layout.SEPARATE
    )
    listed: list[str] = []
    for rs in sorted(slices, key=lambda s: str(s.metadata.name if s.metadata else "")):
        for device in rs.spec.devices or ():
            counter_set = (device.consumes_counters or [])[0].counter_set
            if not listed or listed[-1] != counter_set:
                listed.append(counter_set)
    assert listed == [c.base_name for c in node_order(cards)]
