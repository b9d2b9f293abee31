"""Namespace label changes → the namespace's pending claims.

Admin access is allowed only in namespaces labelled ``resource.kubernetes.io/admin-access: "true"``;
a claim that failed for want of the label (a fatal failure, not retried) is woken when it is added.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.indexes import CLAIM_PENDING, PENDING
from pkg.dracontroller.internal.watch.slice_watch import requests_of
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def namespace_watch(claim_store: Store[Any]) -> ObjectRefWatch:
    def enqueue(obj: Any) -> list[Request]:
        name = str(obj.metadata.name)
        pending = claim_store.by_index(CLAIM_PENDING, PENDING)
        return requests_of([c for c in pending if c.metadata.namespace == name])

    return ObjectRefWatch(
        update_filter=lambda old, new: (old.metadata.labels or {}) != (new.metadata.labels or {}),
        enqueuer=enqueue,
    )
