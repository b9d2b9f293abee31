"""The packing benchmark's optimum (``test/bench/packing_search.py``) on sequences whose answer is
known by hand: one A30 (memory slices 0-3; 1g at any slice, 2g at 0 or 2)."""

from __future__ import annotations

from bench.packing_search import Event, optimum
from testutil.unit.dra.offers.offer_models import card

from pkg.dra.model.offers import build_offers

A30 = [build_offers(card("A30"))]


def arrivals(*sizes: str, start: int = 0) -> list[Event]:
    return [Event(start + i, size=s) for i, s in enumerate(sizes)]


def test_a_full_card_stops_the_fifth_1g() -> None:
    best = optimum(A30, arrivals("1g", "1g", "1g", "1g", "1g"), horizon=5)
    assert (best.satisfied, best.exact) == (4, True)


def test_the_optimum_keeps_released_slices_aligned_for_a_2g() -> None:
    # Four 1g fill the card; arrivals 0 and 2 leave. A 2g then fits only if those two held an
    # aligned pair (0-1 or 2-3): knowing the future, the optimum places them so, and satisfies all 5.
    events = [
        *arrivals("1g", "1g", "1g", "1g"),
        Event(-1, release=0),
        Event(-1, release=2),
        Event(4, size="2g"),
    ]
    assert optimum(A30, events, horizon=5).satisfied == 5


def test_a_2g_beside_a_4g_card_is_impossible() -> None:
    events = arrivals("4g", "2g", "1g")
    assert optimum(A30, events, horizon=3).satisfied == 1
