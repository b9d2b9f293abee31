"""In which order the search tries devices: best fit (ours) or first fit (the scheduler's).

The search takes the first complete solution it finds, so the order *is* the policy.

:class:`FirstFit` reproduces the kube-scheduler: pools by driver and name, slices by name, devices
as listed. It is the baseline of the fragmentation benchmark and of the differential test.

:class:`BestFit` (what gpu-dra-controller allocates with) packs partitions tightly, so that large
MIG profiles stay placeable as the cluster fills up:

1. cards where the device does not fit at all go last;
2. among cards, the one with the **fewest free memory slices** first — partly used cards fill up
   before fresh ones, and a small card before a large one;
3. then the card with the **least free memory**;
4. within a card, the placement that keeps the **largest partition still placeable**: for each
   candidate placement, the largest offer of the same card (by memory slices) that would still fit
   in the slices left free. With slice 3 of an A30 taken, a 1g goes to slice 2 (0-1 stay free for a
   2g) rather than slice 0 (which would strand 1 and 2);
5. for a request of several devices, among cards equal by 1-3 on one node, those of **one NVLink
   domain, then one PCIe root** together (:mod:`.topology`; the search only, not ``order``);
6. then first-fit order (stable names).

A "card" is a device's first counter set; a memory slice is a counter named ``memory-slice-<n>``
that still has something available. Free-slice sets are bitmasks, so step 4 costs one AND per
offer of the card.

Two ways to produce that order, with identical results (a unit test compares them):

* :meth:`Strategy.order` ranks a given list of selectable devices at once; ``explain`` uses it to
  list every device;
* :meth:`Strategy.search_order` is what the search uses, and is **lazy**: at cluster scale (8000
  cards) ranking every card and evaluating every selector on every device for each decision costs
  tens of milliseconds, and the first decisions after a restart would evaluate selectors on all
  224k devices. A card nothing is charged on ranks by its counter totals alone (every pool keeps
  its cards with that rank, :class:`~.pools.CardRank`, and best fit keeps all of them sorted until
  a pool changes), so best fit ranks only the cards something is charged on (few), merges them
  with the presorted cards, and evaluates a card's selectors only when the search reaches it.
  The search usually stops at the first card that fits, so a decision touches a handful of cards.

Why the merge gives the eager order: the eager rank key of a card is ``(does not fit, free
slices, free memory, position of its first selectable device)``. For a card nothing is charged on,
free slices and memory are its totals; and when each card's devices are one block of the pool's
first-fit order (``Pool.contiguous``), comparing the positions of two cards' first *selectable*
devices gives the same answer as comparing the positions of their first devices. So the presorted
stream is in key order; a card whose devices all fail their counters is held back and merged
into the tail (key ``True, …``), exactly where the eager sort puts it. Pools that are not
contiguous are ranked eagerly, card by card, and merged like charged cards.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from pkg.dra.allocator.context import AllocationContext, SelectorKey, selector_key
from pkg.dra.allocator.counters import CounterTally
from pkg.dra.allocator.pools import MEMORY_COUNTER, Candidate, CardRank, Pool
from pkg.dra.allocator.requests import Alternative
from pkg.dra.allocator.selection import SelectorEvaluationError
from pkg.dra.allocator.topology import keep_together
from pkg.dra.model import PoolID
from pkg.dra.model.fill_order import largest_placeable

_MAX_STATIC_ORDERS = 512  # per pool
_MAX_CARD_MEMOS = 512  # selector keys per pool

RankKey = tuple[bool, int, int, tuple[bool, str, str, int]]
Ranked = tuple[RankKey, Sequence[Candidate]]


class CandidateStream:
    """Candidates in strategy order, produced on demand: the search asks :meth:`has` before it
    reads a position, and positions once produced never change."""

    def __init__(self, chunks: Iterator[Sequence[Candidate]]) -> None:
        self._items: list[Candidate] = []
        self._chunks = chunks

    @classmethod
    def of(cls, candidates: Sequence[Candidate]) -> CandidateStream:
        return cls(iter((candidates,)))

    def has(self, index: int) -> bool:
        while len(self._items) <= index:
            chunk = next(self._chunks, None)
            if chunk is None:
                return False
            self._items.extend(chunk)
        return True

    def __getitem__(self, index: int) -> Candidate:
        return self._items[index]


class Strategy(Protocol):
    name: str

    def order(
        self, candidates: Sequence[Candidate], *, counters: CounterTally, fits: Callable[[Candidate], bool]
    ) -> Sequence[Candidate]:
        """``candidates`` (selectable devices, in first-fit order) in the order to try them."""
        ...

    def search_order(self, ctx: AllocationContext, alt: Alternative) -> CandidateStream:
        """The same order for the devices ``alt`` may select, as the search consumes it; raises
        nothing for selector errors: they are recorded in ``ctx.selector_errors``."""
        ...


class FirstFit:
    name = "first-fit"

    def order(
        self, candidates: Sequence[Candidate], *, counters: CounterTally, fits: Callable[[Candidate], bool]
    ) -> Sequence[Candidate]:
        return candidates

    def search_order(self, ctx: AllocationContext, alt: Alternative) -> CandidateStream:
        return CandidateStream.of(ctx.eligible(alt))


class BestFit:
    name = "best-fit"

    def __init__(self) -> None:
        self._index: _PoolIndex | None = None

    def order(
        self, candidates: Sequence[Candidate], *, counters: CounterTally, fits: Callable[[Candidate], bool]
    ) -> Sequence[Candidate]:
        cards: dict[tuple[object, str | None], list[Candidate]] = {}
        for cand in candidates:
            cards.setdefault((cand.pool.id, cand.card), []).append(cand)
        ranked = [_rank_members(members, counters, fits) for members in cards.values()]
        ranked.sort(key=lambda item: item[0])
        ordered: list[Candidate] = []
        for _, members_in_order in ranked:
            ordered.extend(members_in_order)
        return ordered

    def search_order(self, ctx: AllocationContext, alt: Alternative) -> CandidateStream:
        key = selector_key(alt)
        counters = ctx.counters
        index = self._pool_index(ctx.pools)
        eager: list[Ranked] = []  # every card of the special pools, ranked now
        for pool in index.special:
            for rank in pool.cards.values():
                entry = _card_entry(ctx, alt, pool, rank, key)
                if entry is not None:
                    eager.append(_rank_members(list(entry.members), counters, ctx.fits_counters))
        eager.sort(key=lambda item: item[0])
        # Charged cards of the simple pools, by the part of their rank the counters alone decide
        # (taken now: a card's counters change during the search only once the search reached it).
        charged: list[tuple[_Provisional, CardRank]] = []
        for pool_id, counter_set in counters.touched_sets():
            simple = index.simple.get(pool_id)
            card_rank = simple.cards.get(counter_set) if simple is not None else None
            if card_rank is not None:
                free = counters.available(pool_id, counter_set)
                first = card_rank.members[0]
                charged.append(
                    (
                        (_free_mask(first, free).bit_count(), free.get(MEMORY_COUNTER, 0), card_rank.start),
                        card_rank,
                    )
                )
        charged.sort(key=lambda item: item[0])
        skip = {(rank.members[0].pool.id, rank.card) for _, rank in charged}
        uncharged = (
            (_stream_key(r), r)
            for r in index.ranked
            if not skip or (r.members[0].pool.id, r.card) not in skip
        )
        lazy = heapq.merge(charged, uncharged, key=lambda item: item[0])
        ranked = _merge(ctx, alt, key=key, eager=eager, lazy=lazy)
        if alt.count > 1 and not alt.all_devices:
            return CandidateStream(keep_together(ranked, alt.count))
        return CandidateStream(members for _, members in ranked)

    def _pool_index(self, pools: list[Pool]) -> _PoolIndex:
        index = self._index
        if index is not None and (index.pools is pools or index.pools == pools):
            return index
        usable = [p for p in pools if p.usable]
        simple = [p for p in usable if p.contiguous and not p.multi_set_cards]
        index = _PoolIndex(
            pools=pools,
            simple={p.id: p for p in simple},
            ranked=sorted((r for p in simple for r in p.ranked_cards), key=_stream_key),
            special=[p for p in usable if not p.contiguous or p.multi_set_cards],
        )
        self._index = index
        return index


_Provisional = tuple[int, int, tuple[bool, str, str, int]]  # free slices, free memory, position


@dataclass(frozen=True)
class _PoolIndex:
    """What best fit derives from one list of pools (rebuilt only when a pool changes).

    A *simple* pool is usable, contiguous and has no device on several counter sets: its cards are
    ranked lazily. The other usable pools are *special*: all their cards are ranked per decision.
    """

    pools: list[Pool]  # compared by identity: pools are immutable once built
    simple: dict[PoolID, Pool]
    ranked: list[CardRank]  # the cards of the simple pools, by their rank while uncharged
    special: list[Pool]


def _merge(
    ctx: AllocationContext,
    alt: Alternative,
    *,
    key: SelectorKey,
    eager: list[Ranked],
    lazy: Iterator[tuple[_Provisional, CardRank]],
) -> Iterator[Ranked]:
    """The cards ranked now (``eager``, sorted) merged with the simple pools' cards (``lazy``, in
    provisional order), each evaluated when reached: fitting cards first, then the rest, the way
    the eager sort puts them (see the module docs); each with its rank key."""
    fitting = [item for item in eager if not item[0][0]]
    held_back = [item for item in eager if item[0][0]]
    deferred: list[Ranked] = []
    i = 0
    for _, rank in lazy:
        pool = rank.members[0].pool
        entry = _card_entry(ctx, alt, pool, rank, key)
        if entry is None:
            continue
        touched = rank.card is not None and ctx.counters.touched(pool.id, rank.card)
        rank_key, members = _rank_charged(ctx, entry) if touched else entry.static
        if rank_key[0]:
            deferred.append((rank_key, members))
            continue
        while i < len(fitting) and fitting[i][0] < rank_key:
            yield fitting[i]
            i += 1
        yield rank_key, members
    yield from fitting[i:]
    yield from heapq.merge(deferred, held_back, key=lambda item: item[0])


def _stream_key(rank: CardRank) -> tuple[int, int, tuple[bool, str, str, int]]:
    return (rank.slices, rank.memory, rank.start)


class _CardEntry(NamedTuple):
    members: tuple[Candidate, ...]  # selectable devices of the card (selector true or failing)
    errors: dict[Candidate, SelectorEvaluationError]
    static: Ranked  # rank key and device order while nothing is charged on the card
    shared: tuple[Candidate, ...]  # members that allow multiple allocations
    charged: dict[tuple[object, ...], Ranked]  # rank and order per state of the card's counters


_MAX_CHARGED_STATES = 64  # per card and selector key


def _rank_charged(ctx: AllocationContext, entry: _CardEntry) -> Ranked:
    """The rank and order of a card with charges, memoised per state of the card: its free counters
    and which of its shared devices are in use decide both, when every device of the card consumes
    only the card's counter set (a card of devices on several sets is ranked afresh)."""
    first = entry.members[0]
    card, pool = first.card, first.pool
    if card is None or card in pool.multi_set_cards:
        return _rank_members(list(entry.members), ctx.counters, ctx.fits_counters)
    in_use = ctx.capacity.in_shared_use
    state = (*ctx.counters.available(pool.id, card).values(), *(in_use(c.id) for c in entry.shared))
    ranked = entry.charged.get(state)
    if ranked is None:
        ranked = _rank_members(list(entry.members), ctx.counters, ctx.fits_counters)
        if len(entry.charged) >= _MAX_CHARGED_STATES:
            entry.charged.clear()
        entry.charged[state] = ranked
    return ranked


def _card_entry(
    ctx: AllocationContext, alt: Alternative, pool: Pool, rank: CardRank, key: SelectorKey
) -> _CardEntry | None:
    """The card's selectable devices for ``alt`` (memoised on the pool), None when there are none;
    records their selector errors in the context."""
    memo = pool.card_memo.get(key)
    if memo is None:
        if len(pool.card_memo) >= _MAX_CARD_MEMOS:
            pool.card_memo.clear()
        memo = pool.card_memo[key] = {}
    if rank.card in memo:
        entry: _CardEntry | None = memo[rank.card]
    else:
        matching, errors = ctx.match(alt, rank.members)
        entry = None
        if matching:
            static = _card_order(matching, [c for c in matching if c.fits_totals], None)
            entry = _CardEntry(tuple(matching), errors, static, tuple(c for c in matching if c.shared), {})
        memo[rank.card] = entry
    if entry is not None and entry.errors:
        ctx.selector_errors.update(entry.errors)
    return entry


def _rank_members(
    members: list[Candidate], counters: CounterTally, fits: Callable[[Candidate], bool]
) -> Ranked:
    """One card's rank key and its devices in order, from the live counters or, when nothing is
    charged on the card, from its totals (memoised on the immutable pool)."""
    first = members[0]
    card, pool = first.card, first.pool
    if card is not None and card not in pool.multi_set_cards and not counters.touched(pool.id, card):
        memo_key = tuple(members)
        static = pool.static_order.get(memo_key)
        if static is None:
            static = _card_order(members, [c for c in members if c.fits_totals], None)
            if len(pool.static_order) >= _MAX_STATIC_ORDERS:
                pool.static_order.clear()
            pool.static_order[memo_key] = static
        return static
    return _card_order(members, [c for c in members if fits(c)], counters)


def _card_order(
    members: list[Candidate], fitting: list[Candidate], counters: CounterTally | None
) -> tuple[RankKey, list[Candidate]]:
    """One card's rank key and its devices in order: fitting ones by placement, then the rest.
    ``counters`` None: nothing is charged on the card, its free counters are its totals."""
    first = members[0]
    if first.card is None:
        key: RankKey = (not fitting, 0, 0, first.order)
    else:
        free = _free(first, counters)
        key = (not fitting, _free_mask(first, free).bit_count(), free.get(MEMORY_COUNTER, 0), first.order)
    if len(fitting) > 1 and fitting[0].card is not None:
        free_mask = _free_mask(fitting[0], _free(fitting[0], counters))
        fitting.sort(key=lambda c: (-_largest_left(c, free_mask), c.order))
    return key, [*fitting, *(c for c in members if c not in fitting)]


def _free(cand: Candidate, counters: CounterTally | None) -> dict[str, int]:
    assert cand.card is not None
    if counters is None:
        return cand.pool.counter_sets[cand.card]
    return counters.available(cand.pool.id, cand.card)


def _free_mask(cand: Candidate, free: dict[str, int]) -> int:
    mask = 0
    assert cand.card is not None
    for name, bit in cand.pool.slice_bits[cand.card].items():
        if free.get(name, 0) > 0:
            mask |= 1 << bit
    return mask


def _largest_left(cand: Candidate, free_mask: int) -> int:
    """Memory slices of the largest offer of the card that still fits after placing ``cand``."""
    assert cand.card is not None
    offers = cand.pool.card_offers[cand.card]  # largest first
    return largest_placeable((offer.slice_mask for offer in offers), free_mask & ~cand.slice_mask)
