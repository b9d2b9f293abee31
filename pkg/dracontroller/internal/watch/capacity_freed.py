"""Claim events -> every pending claim, when an allocation disappeared.

An allocation released, or an allocated claim deleted, frees capacity any pending claim may now
fit in. Only that transition passes: a claim appearing frees nothing, and an update passes only
when the claim was allocated before and is not any more.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.eligibility import is_allocated
from pkg.dracontroller.internal.indexes import CLAIM_PENDING, PENDING
from pkg.dracontroller.internal.watch.slice_watch import requests_of
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def released(old: Any, new: Any) -> bool:
    return is_allocated(old) and not is_allocated(new)


def never(_obj: Any) -> bool:
    return False


def capacity_freed_watch(claim_store: Store[Any]) -> ObjectRefWatch:
    def enqueue(_claim: Any) -> list[Request]:
        return requests_of(claim_store.by_index(CLAIM_PENDING, PENDING))

    return ObjectRefWatch(
        update_filter=released, enqueuer=enqueue, create_filter=never, delete_filter=is_allocated
    )
