"""Shared counters (KEP-4815): what a card still has free, and charging an attempt against it.

``available = counter-set totals - consumption of every allocated device of the pool`` — devices
reachable from the node or not, since they share the card. A device counts as allocated if any
claim holds it, exclusively or by one or more shares; a device that allows multiple allocations is
therefore charged **once** however many shares exist, and a further share never charges it again
(the scheduler's ``skipCounterCheck``). This is what enforces the Physical/MIG/sharing invariant:
every Physical offer (exclusive, time-slicing, MPS) consumes all counters of its card, so once one
is allocated no MIG offer and no other mode fits, and the reverse.

During the search, :meth:`CounterTally.charge` takes a device's counters if every one of them is
still available and says which counter ran out otherwise; :meth:`refund` undoes it on backtracking.
Values are exact nano integers.
"""

from __future__ import annotations

from collections.abc import Iterable

from pkg.dra.allocator.allocated import AllocatedDevices
from pkg.dra.allocator.pools import Candidate, Pool
from pkg.dra.model import PoolID

CounterKey = tuple[PoolID, str]
_NONE: dict[str, int] = {}


class CounterTally:
    """Per-decision free counters, built from the allocated devices only (not every device).

    Counter sets no allocated device touches are not copied: reads fall back to the pool's
    immutable totals, and a set is copied on its first charge (copy-on-write). So building costs
    O(allocated devices), and :meth:`touched` says whether a set may differ from its totals.
    """

    def __init__(self, pools: Iterable[Pool], allocated: AllocatedDevices) -> None:
        self._available: dict[CounterKey, dict[str, int]] = {}
        self._pools: dict[PoolID, Pool] = {
            pool.id: pool for pool in pools if pool.usable and pool.counter_sets
        }
        by_pool = self._pools
        # Each allocated device once (a device can be held both exclusively and by shares).
        for device in {*allocated.dedicated, *allocated.shares, *allocated.consumed}:
            holder = by_pool.get(PoolID(device.driver, device.pool))
            if holder is None:
                continue
            cand = holder.devices.get(device.device)
            if cand is not None and cand.consumes:
                self._apply(cand, -1)

    def available(self, pool: PoolID, counter_set: str) -> dict[str, int]:
        """Live view of what is free in one counter set (do not mutate)."""
        free = self._available.get((pool, counter_set))
        if free is None:
            free = self._totals(pool, counter_set)
        return free

    def _totals(self, pool: PoolID, counter_set: str) -> dict[str, int]:
        holder = self._pools.get(pool)
        return holder.counter_sets.get(counter_set, _NONE) if holder is not None else _NONE

    def touched(self, pool: PoolID, counter_set: str) -> bool:
        """Whether the set has ever been charged; an untouched set is exactly its totals."""
        return (pool, counter_set) in self._available

    def touched_sets(self) -> frozenset[CounterKey]:
        """Every set charged so far (a snapshot)."""
        return frozenset(self._available)

    def shortfall(self, cand: Candidate) -> tuple[str, str] | None:
        """``(counter set, counter)`` that cannot cover ``cand``, or None when all can."""
        pool_id = cand.pool.id
        for counter_set, amounts in cand.consumes:
            key = (pool_id, counter_set)
            free = self._available.get(key)
            if free is None:
                free = self._pools[pool_id].counter_sets[counter_set]
            for name, amount in amounts:
                if free[name] < amount:
                    return counter_set, name
        return None

    def charge(self, cand: Candidate) -> tuple[str, str] | None:
        """Take ``cand``'s counters; returns the exhausted counter instead when they do not fit."""
        missing = self.shortfall(cand)
        if missing is None:
            self._apply(cand, -1)
        return missing

    def refund(self, cand: Candidate) -> None:
        self._apply(cand, 1)

    def _apply(self, cand: Candidate, sign: int) -> None:
        pool_id = cand.pool.id
        for counter_set, amounts in cand.consumes:
            key = (pool_id, counter_set)
            free = self._available.get(key)
            if free is None:
                free = self._available[key] = dict(self._pools[pool_id].counter_sets[counter_set])
            for name, amount in amounts:
                free[name] += sign * amount
