"""The Physical/MIG/sharing invariant holds by counters alone, for every model.

The arithmetic of :mod:`offer_checks` is what the kube-scheduler and our allocator do. Besides the
exclusions, the counters must not over-block: every MIG layout the hardware allows (placements
that do not overlap, per-profile instance limits, at most one ``+me`` instance) fits, and every
layout it does not allow overdraws some counter.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from testutil.unit.dra.offers.offer_checks import by_name, fits, mig, overdrawn
from testutil.unit.dra.offers.offer_models import MIG_MODELS, card, max_instances

from pkg.dra.model.offers import CardOffers, Offer, build_offers

BASE = "gpu-0000-02-00-0"


@pytest.fixture(params=MIG_MODELS)
def offers(request: pytest.FixtureRequest) -> CardOffers:
    return build_offers(card(request.param))


def test_physical_and_any_mig_offer_never_fit_together(offers: CardOffers) -> None:
    physical = by_name(offers)[BASE]
    assert fits(offers, [physical])
    for offer in mig(offers):
        assert fits(offers, [offer]), offer.name
        assert overdrawn(offers, [physical, offer]), offer.name


@pytest.mark.parametrize("model", [*MIG_MODELS, "L4"])
def test_whole_card_offers_exclude_each_other(model: str) -> None:
    offers = build_offers(card(model))
    names = by_name(offers)
    whole = [names[BASE], names[f"{BASE}-ts"], names[f"{BASE}-mps"]]
    for a, b in itertools.combinations(whole, 2):
        assert overdrawn(offers, [a, b]) == sorted(offers.counter_set.counters), (a.name, b.name)
    for shared in whole[1:]:
        assert all(overdrawn(offers, [shared, o]) for o in mig(offers))


def test_mig_offers_overlapping_a_slice_never_fit_together(offers: CardOffers) -> None:
    for a, b in itertools.combinations(mig(offers), 2):
        assert a.placement is not None
        assert b.placement is not None
        shared = set(a.placement.slices) & set(b.placement.slices)
        if shared:
            lost = overdrawn(offers, [a, b])
            assert {f"memory-slice-{i}" for i in shared} <= set(lost), (a.name, b.name)


def test_at_most_one_media_engine_instance(offers: CardOffers) -> None:
    me = [o for o in mig(offers) if o.profile is not None and o.profile.name.endswith("+me")]
    assert me
    for a, b in itertools.combinations(me, 2):
        assert "ofa-engines" in overdrawn(offers, [a, b])


@pytest.mark.parametrize("model", MIG_MODELS)
def test_counters_allow_exactly_the_layouts_the_hardware_allows(model: str) -> None:
    offers = build_offers(card(model))
    limits = max_instances(model)
    layouts = 0
    for layout in _disjoint_layouts(mig(offers)):
        layouts += 1
        assert fits(offers, layout) == _hardware_allows(layout, limits), [o.name for o in layout]
    assert layouts > 10


def _disjoint_layouts(offers: list[Offer]) -> Iterator[list[Offer]]:
    """Every non-empty set of MIG offers whose placements do not overlap."""

    def extend(start: int, used: set[int], chosen: list[Offer]) -> Iterator[list[Offer]]:
        for i in range(start, len(offers)):
            placement = offers[i].placement
            assert placement is not None
            if used.isdisjoint(placement.slices):
                layout = [*chosen, offers[i]]
                yield layout
                yield from extend(i + 1, used | set(placement.slices), layout)

    yield from extend(0, set(), [])


def _hardware_allows(layout: list[Offer], limits: dict[str, int]) -> bool:
    names = [o.profile.name for o in layout if o.profile is not None]
    per_profile = all(names.count(n) <= limits[n] for n in set(names))
    return per_profile and sum(n.endswith("+me") for n in names) <= 1
