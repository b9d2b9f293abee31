"""In which order the search tries devices: best fit (ours) or first fit (the scheduler's).

The search takes the first complete solution it finds, so the order *is* the policy.

:class:`FirstFit` reproduces the kube-scheduler: pools by driver and name, slices by name, devices
as listed. It is the baseline of the fragmentation benchmark and of the differential test.

:class:`BestFit` (DESIGN §5, spec §9.1) packs partitions tightly:

1. cards where the device does not fit at all go last;
2. among cards, the one with the **fewest free memory slices** first — partly used cards fill up
   before fresh ones, and a small card before a large one;
3. then the card with the **least free memory**;
4. within a card, the placement that keeps the **largest partition still placeable**: for each
   candidate placement, the largest offer of the same card (by memory slices) that would still fit
   in the slices left free. With slice 3 of an A30 taken, a 1g goes to slice 2 (0-1 stay free for a
   2g) rather than slice 0 (which would strand 1 and 2);
5. then first-fit order (stable names).

A "card" is a device's first counter set; a memory slice is a counter named ``memory-slice-<n>``
that still has something available. Free-slice sets are bitmasks, so step 4 costs one AND per
offer of the card.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from pkg.dra.allocator.counters import CounterLedger
from pkg.dra.allocator.pools import MEMORY_COUNTER, Candidate

_MAX_STATIC_ORDERS = 512  # per pool


class Strategy(Protocol):
    name: str

    def order(
        self, candidates: Sequence[Candidate], *, counters: CounterLedger, fits: Callable[[Candidate], bool]
    ) -> Sequence[Candidate]:
        """``candidates`` (selectable devices, in first-fit order) in the order to try them."""
        ...


class FirstFit:
    name = "first-fit"

    def order(
        self, candidates: Sequence[Candidate], *, counters: CounterLedger, fits: Callable[[Candidate], bool]
    ) -> Sequence[Candidate]:
        return candidates


class BestFit:
    name = "best-fit"

    def order(
        self, candidates: Sequence[Candidate], *, counters: CounterLedger, fits: Callable[[Candidate], bool]
    ) -> Sequence[Candidate]:
        cards: dict[tuple[object, str | None], list[Candidate]] = {}
        for cand in candidates:
            cards.setdefault((cand.pool.id, cand.card), []).append(cand)
        ranked: list[tuple[tuple[bool, int, int, tuple[bool, str, str, int]], Sequence[Candidate]]] = []
        for members in cards.values():
            first = members[0]
            card = first.card
            pool = first.pool
            if card is not None and card not in pool.multi_set_cards and not counters.touched(pool.id, card):
                # Nothing allocated or tentatively charged on this card: its free counters are the
                # totals (and none of its devices is in shared use), so its key and order are static
                # for these members; memoised on the (immutable, cached) pool.
                memo_key = tuple(members)
                static = pool.static_order.get(memo_key)
                if static is None:
                    static = _card_order(members, [c for c in members if c.fits_totals], counters)
                    if len(pool.static_order) >= _MAX_STATIC_ORDERS:
                        pool.static_order.clear()
                    pool.static_order[memo_key] = static
                ranked.append(static)
            else:
                ranked.append(_card_order(members, [c for c in members if fits(c)], counters))
        ranked.sort(key=lambda item: item[0])
        ordered: list[Candidate] = []
        for _, members_in_order in ranked:
            ordered.extend(members_in_order)
        return ordered


def _card_order(
    members: list[Candidate], fitting: list[Candidate], counters: CounterLedger
) -> tuple[tuple[bool, int, int, tuple[bool, str, str, int]], list[Candidate]]:
    """One card's rank key and its devices in order: fitting ones by placement, then the rest."""
    first = members[0]
    if first.card is None:
        key = (not fitting, 0, 0, first.order)
    else:
        free = counters.available(first.pool.id, first.card)
        key = (not fitting, _free_mask(first, free).bit_count(), free.get(MEMORY_COUNTER, 0), first.order)
    if len(fitting) > 1 and fitting[0].card is not None:
        free_mask = _free_mask(fitting[0], counters.available(fitting[0].pool.id, fitting[0].card))
        fitting.sort(key=lambda c: (-_largest_left(c, free_mask), c.order))
    return key, [*fitting, *(c for c in members if c not in fitting)]


def _free_mask(cand: Candidate, free: dict[str, int]) -> int:
    mask = 0
    assert cand.card is not None
    for name, bit in cand.pool.slice_bits[cand.card].items():
        if free.get(name, 0) > 0:
            mask |= 1 << bit
    return mask


def _largest_left(cand: Candidate, free_mask: int) -> int:
    """Memory slices of the largest offer of the card that still fits after placing ``cand``."""
    left = free_mask & ~cand.slice_mask
    assert cand.card is not None
    for offer in cand.pool.card_offers[cand.card]:  # largest first
        if offer.slice_mask and not offer.slice_mask & ~left:
            return offer.slice_count
    return 0
