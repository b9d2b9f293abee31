"""DeviceClass events → the pending claims that name the class.

A class appearing can make a claim eligible (its class was missing); a changed selector or config
can make it allocatable, ineligible (no longer ours) or broken. Only spec changes matter.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.indexes import CLAIM_BY_CLASS
from pkg.dracontroller.internal.watch.slice_watch import requests_of
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def class_watch(claim_store: Store[Any]) -> ObjectRefWatch:
    def enqueue(obj: Any) -> list[Request]:
        return requests_of(claim_store.by_index(CLAIM_BY_CLASS, str(obj.metadata.name)))

    return ObjectRefWatch(update_filter=lambda old, new: old.spec != new.spec, enqueuer=enqueue)
