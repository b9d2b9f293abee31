"""Counter arithmetic for offer tests: would these offers of one card fit together?

Mirrors what every allocator does with KEP-4815 counters: a device is charged its
``consumesCounters`` once (a shared device once however many shares it has), and a set of devices
fits when, for every counter, the sum charged is at most what the counter set holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from pkg.dra.allocator.quantity import parse_quantity
from pkg.dra.model.offers import CardOffers, Offer


def available(card: CardOffers) -> dict[str, int]:
    return {name: parse_quantity(c.value).nanos for name, c in card.counter_set.counters.items()}


def charged(offers: Iterable[Offer]) -> dict[str, int]:
    total: dict[str, int] = {}
    for offer in {o.name: o for o in offers}.values():
        for use in offer.device.consumes_counters or []:
            for name, counter in use.counters.items():
                total[name] = total.get(name, 0) + parse_quantity(counter.value).nanos
    return total


def overdrawn(card: CardOffers, offers: Iterable[Offer]) -> list[str]:
    """Counters the offers together overdraw (empty: they fit)."""
    have = available(card)
    return sorted(name for name, used in charged(offers).items() if used > have.get(name, 0))


def fits(card: CardOffers, offers: Iterable[Offer]) -> bool:
    return not overdrawn(card, offers)


def by_name(card: CardOffers) -> dict[str, Offer]:
    return {o.name: o for o in card.offers}


def mig(card: CardOffers) -> list[Offer]:
    return [o for o in card.offers if o.profile is not None]
