"""ResourceSlice events → pending claims, and our claims allocated from the slice's pool.

A slice appearing or changing may bring the capacity a pending claim waits for, so every pending
claim is woken (the queue folds duplicates while they wait). Our allocated claims in the same pool
are woken too: a republished pool with fewer counters can turn two allocations into a collision.
Only spec changes matter; a slice's metadata churn does not change any decision.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.indexes import CLAIM_OURS_BY_POOL, CLAIM_PENDING, PENDING
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def requests_of(claims: list[Any]) -> list[Request]:
    return [Request(name=str(c.metadata.name), namespace=str(c.metadata.namespace)) for c in claims]


def slice_watch(claim_store: Store[Any]) -> ObjectRefWatch:
    def enqueue(obj: Any) -> list[Request]:
        pool = f"{obj.spec.driver}/{obj.spec.pool.name}"
        pending = claim_store.by_index(CLAIM_PENDING, PENDING)
        return requests_of(pending + claim_store.by_index(CLAIM_OURS_BY_POOL, pool))

    return ObjectRefWatch(update_filter=lambda old, new: old.spec != new.spec, enqueuer=enqueue)
