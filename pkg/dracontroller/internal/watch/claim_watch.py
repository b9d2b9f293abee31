"""Claim events → other claims whose decision they change (besides the claim itself).

Two relations, each its own watch on the claim informer so that its predicate can look at the
transition (a mapper sees one object at a time):

* **capacity freed** — an allocation disappeared (released, or the allocated claim deleted):
  every pending claim may now fit;
* **allocation landed** — a claim became allocated: our allocated claims in the same pools are
  checked for a collision with it (the scheduler and we may have picked the same device).
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.collisions import pools_of
from pkg.dracontroller.internal.eligibility import is_allocated
from pkg.dracontroller.internal.indexes import CLAIM_OURS_BY_POOL, CLAIM_PENDING, PENDING
from pkg.dracontroller.internal.watch.slice_watch import requests_of
from pkg.framework.cache.store import Store
from pkg.framework.controller.controller import Controller, EventSource
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.predicate import Funcs
from pkg.framework.reconcile.contract import Request


def _allocation(claim: Any) -> Any:
    return claim.status.allocation if claim.status is not None else None


class ClaimPeersWatch:
    def __init__(self, claim_store: Store[Any]) -> None:
        self._store = claim_store

    def _pending(self, _claim: Any) -> list[Request]:
        return requests_of(self._store.by_index(CLAIM_PENDING, PENDING))

    def _same_pools(self, claim: Any) -> list[Request]:
        if not is_allocated(claim):
            return []
        uid = claim.metadata.uid
        ours = {
            c.metadata.uid: c
            for pool in sorted(str(p) for p in pools_of(claim))
            for c in self._store.by_index(CLAIM_OURS_BY_POOL, pool)
        }
        return requests_of([c for u, c in ours.items() if u != uid])

    def watch(self, source: EventSource, controller: Controller) -> None:
        freed = Funcs(
            create=lambda _obj: False,
            update=lambda old, new: is_allocated(old) and not is_allocated(new),
            delete=is_allocated,
        )
        landed = Funcs(
            create=is_allocated,
            update=lambda old, new: is_allocated(new) and _allocation(old) != _allocation(new),
            delete=lambda _obj: False,
        )
        controller.watch(source, EnqueueRequestsFromMapFunc(self._pending), predicates=[freed])
        controller.watch(source, EnqueueRequestsFromMapFunc(self._same_pools), predicates=[landed])
