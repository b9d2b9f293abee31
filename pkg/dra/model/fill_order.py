"""The fill-following order: the node's devices re-ranked by what is already allocated on its cards.

The kube-scheduler takes the first device that fits in our publication order (:mod:`.offer_order`).
A static order cannot know which cards are already partly used, so it sends a small request to the
first card of the node order even when another card has just the hole it fits. The gpu-handler
knows which devices are in use on its node (its preparation checkpoint, filled by the kubelet
right after a Pod is bound), so it republishes its devices ranked by :func:`fill_keys` given that
set, and the scheduler's first fit then takes what a best-fit allocator would take:

1. devices of **partly used cards** first, the card with the **fewest free memory slices**
   first, then the **least free memory** (the cards nothing is charged on rank by their totals, so
   a small card fills before a large one, as in the static node order);
2. within a card, the placement that keeps the **largest offer of that card still placeable**
   after it (with slice 3 of an A30 taken, a 1g goes to slice 2 and keeps 0-1 free for a 2g);
3. ties in the static publication order (:mod:`.offer_order`).

That is the ranking of gpu-dra-controller's best fit (``pkg.dra.allocator.BestFit``, steps 2-4
and 6) expressed over the offers of one node (step 4 is one function, :func:`largest_placeable`,
which the allocator calls), so the two allocators pack alike; ``first fit`` on
this order gives best fit's choice whenever the slices are current when the scheduler decides.
A request only matches devices its class selects, so one ranking of all devices serves every
request: what matters is the relative order among the devices a request could take.

The key of a device starts with its card's (1), so the order keeps each card's offers together and
is a node order of cards plus an order of each card's offers (:func:`fill_order`), which
:func:`~.slices.build_slices` lays out like the static order: cards are never split across
slices, so a card may move to another slice of the pool when the cards' ranks change (a publish
under a new pool generation, as for any change). Only the order changes: the same devices with
the same names and capacities. Offers that take the whole card (Physical, shared, partitions,
vGPU) fit only on an idle card and rank by their card like the rest.

Pure and cheap (one AND per offer pair of a card): the packing benchmark replays it after every
arrival and release (``test/bench/packing_first_fit.py``), and the publisher runs it per publish.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pkg.dra.model.card import Card
from pkg.dra.model.offer_order import signature
from pkg.dra.model.offers import CardOffers

FillKey = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class FillOffer:
    """What the ranking needs of one offer: its card (index in static order), the memory slices
    it takes (a bitmask; a whole-card offer takes all of them) and its memory in MiB."""

    card: int
    mask: int
    memory_mib: int


@dataclass(frozen=True)
class FillCard:
    """One card: all its memory slices (a bitmask) and its memory in MiB."""

    mask: int
    memory_mib: int


def fill_keys(
    cards: Sequence[FillCard], offers: Sequence[FillOffer], in_use: Collection[int]
) -> list[FillKey]:
    """A sort key per offer (``offers`` in static publication order, ``in_use`` their indexes);
    sorting by it (stably) gives the fill-following order."""
    used = [0] * len(cards)
    used_memory = [0] * len(cards)
    for i in in_use:
        o = offers[i]
        used[o.card] |= o.mask
        used_memory[o.card] += o.memory_mib
    # Per card, its offers' masks largest first (for "the largest offer still placeable").
    by_card: list[list[int]] = [[] for _ in cards]
    for o in offers:
        if o.mask:
            by_card[o.card].append(o.mask)
    for masks in by_card:
        masks.sort(key=lambda m: -m.bit_count())
    card_keys = []
    for c, card in enumerate(cards):
        free = card.mask & ~used[c]
        card_keys.append((free.bit_count(), max(card.memory_mib - used_memory[c], 0)))
    keys: list[FillKey] = []
    for position, o in enumerate(offers):
        free = cards[o.card].mask & ~used[o.card]
        slices, memory = card_keys[o.card]
        keys.append((slices, memory, o.card, -largest_placeable(by_card[o.card], free & ~o.mask), position))
    return keys


def largest_placeable(masks: Iterable[int], free: int) -> int:
    """Memory slices of the largest offer that fits in the ``free`` slices: ``masks`` are the
    memory slices of a card's offers, largest first (offers without memory slices are skipped).
    Best fit's placement criterion; ``pkg.dra.allocator``'s best fit calls this too."""
    for m in masks:
        if m and not m & ~free:
            return m.bit_count()
    return 0


def fill_order(cards: Sequence[CardOffers], in_use: Collection[str]) -> list[CardOffers]:
    """``cards`` (in static node order, offers in static order) in fill-following order given the
    device names ``in_use``: cards by their rank, each card's offers by theirs."""
    rank = fill_rank(cards, in_use)
    ordered = sorted(cards, key=lambda c: rank[c.offers[0].name][:3] if c.offers else (0, 0, 0))
    return [
        dataclasses.replace(c, offers=tuple(sorted(c.offers, key=lambda o: rank[o.name]))) for c in ordered
    ]


def follows_fill(cards: Iterable[Card]) -> bool:
    """Whether a node of ``cards`` publishes in the fill-following order: MIG cards of more than one
    model (:func:`fill_rank` says why); any other node keeps the static order whatever is in use."""
    return len({signature(c) for c in cards if c.mig_allowed and c.mig_profiles}) > 1


def fill_rank(cards: Sequence[CardOffers], in_use: Collection[str]) -> Mapping[str, FillKey]:
    """Every device of ``cards`` (in static node order, offers in static order) by name, with its
    key given the device names ``in_use`` on the node; names not published are ignored.

    Only a node with MIG cards of more than one model follows the fill: there it packs as best
    fit does (476 against the static order's 468 of table 2's 502, and on held-out seeds), while
    on a node of one model the static order's "first card that fits" already concentrates the
    work and the fill loses (two cards of an 8-slice model: 190 against 195 over 20 seeds; eight
    H100: 735 against 741, below NVML's 737). Such a node keeps the static order whatever is in use.
    """
    if not follows_fill(c.card for c in cards):
        published = [(c, o.name) for c, card_offers in enumerate(cards) for o in card_offers.offers]
        return {name: (0, 0, c, 0, position) for position, (c, name) in enumerate(published)}
    fill_cards: list[FillCard] = []
    offers: list[FillOffer] = []
    names: list[str] = []
    for c, card_offers in enumerate(cards):
        card = card_offers.card
        # A card without MIG offers has no memory slices to rank by: it ranks as full (before the
        # partitionable cards, as in the static node order), by its free memory.
        whole = (1 << card.memory_slices) - 1 if card.mig_allowed and not card.vgpu_mode else 0
        fill_cards.append(FillCard(whole, card.memory_mib))
        for offer in card_offers.offers:
            if offer.placement is not None and offer.profile is not None:
                mask = sum(1 << s for s in offer.placement.slices)
                memory = offer.profile.memory_mib
            else:
                mask, memory = whole, card.memory_mib
            offers.append(FillOffer(c, mask, memory))
            names.append(offer.name)
    index = {n: i for i, n in enumerate(names)}
    keys = fill_keys(fill_cards, offers, [index[n] for n in in_use if n in index])
    return dict(zip(names, keys, strict=True))
