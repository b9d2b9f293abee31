"""Claim events -> our allocated claims in the same pools, when an allocation landed.

A claim that became allocated (by us or by the scheduler) may have taken a device one of our
claims holds: those are checked for a collision. Only a new or changed allocation passes; a
deleted claim lands nothing.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.collisions import pools_of
from pkg.dracontroller.internal.eligibility import is_allocated
from pkg.dracontroller.internal.indexes import CLAIM_OURS_BY_POOL
from pkg.dracontroller.internal.watch.slice_watch import requests_of
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def _allocation(claim: Any) -> Any:
    return claim.status.allocation if claim.status is not None else None


def landed(old: Any, new: Any) -> bool:
    return is_allocated(new) and _allocation(old) != _allocation(new)


def never(_obj: Any) -> bool:
    return False


def allocation_landed_watch(claim_store: Store[Any]) -> ObjectRefWatch:
    def enqueue(claim: Any) -> list[Request]:
        if not is_allocated(claim):
            return []
        uid = claim.metadata.uid
        ours = {
            c.metadata.uid: c
            for pool in sorted(str(p) for p in pools_of(claim))
            for c in claim_store.by_index(CLAIM_OURS_BY_POOL, pool)
        }
        return requests_of([c for u, c in ours.items() if u != uid])

    return ObjectRefWatch(
        update_filter=landed, enqueuer=enqueue, create_filter=is_allocated, delete_filter=never
    )
