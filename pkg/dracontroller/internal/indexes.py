"""Store indexes of the allocation controller: which claims an event about another object wakes.

Every watch answers "which claims does this change concern?" from an index, never by scanning:

* :data:`POD_BY_CLAIM` (Pods): ``namespace/claim`` of every claim a Pod that may still run
  references — the eligibility rule "no Pod references it" and the Pod watch use it;
* :data:`CLAIM_PENDING` (claims): unallocated claims that are not the scheduler's, woken when
  capacity appears (a slice changes, an allocation is released);
* :data:`CLAIM_BY_CLASS` (claims): pending claims by every device class they name, woken when a
  class changes;
* :data:`CLAIM_OURS_BY_POOL` (claims): claims we allocated, by ``driver/pool`` of each device,
  woken when another allocation lands in the same pool (a possible collision).

Informers add them with :meth:`~pkg.framework.cache.informer.SharedInformer.ensure_indexers`,
which is idempotent, so a second controller in the process may declare them again.
"""

from __future__ import annotations

from typing import Any

from pkg.dracontroller.internal.collisions import pools_of
from pkg.dracontroller.internal.eligibility import (
    claims_of_pod,
    is_allocated,
    is_scheduler_claim,
    requested_classes,
)
from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US
from pkg.framework.cache.store import Indexers

POD_BY_CLAIM = "pod-by-resourceclaim"
CLAIM_PENDING = "resourceclaim-pending"
CLAIM_BY_CLASS = "resourceclaim-pending-by-class"
CLAIM_OURS_BY_POOL = "resourceclaim-ours-by-pool"
PENDING = "pending"


def is_ours(claim: Any) -> bool:
    """Allocated by this controller (the mark is written with the allocation)."""
    annotations = (claim.metadata.annotations if claim.metadata else None) or {}
    return bool(annotations.get(ALLOCATED_BY) == ALLOCATED_BY_US)


def is_pending(claim: Any) -> bool:
    if claim.metadata is not None and claim.metadata.deletion_timestamp is not None:
        return False
    return not is_allocated(claim) and not is_scheduler_claim(claim)


def _pending(claim: Any) -> list[str]:
    return [PENDING] if is_pending(claim) else []


def _by_class(claim: Any) -> list[str]:
    return sorted(set(requested_classes(claim))) if is_pending(claim) else []


def _ours_by_pool(claim: Any) -> list[str]:
    if not (is_allocated(claim) and is_ours(claim)):
        return []
    return sorted(str(pool) for pool in pools_of(claim))


CLAIM_INDEXERS: Indexers = {
    CLAIM_PENDING: _pending,
    CLAIM_BY_CLASS: _by_class,
    CLAIM_OURS_BY_POOL: _ours_by_pool,
}
POD_INDEXERS: Indexers = {POD_BY_CLAIM: claims_of_pod}
