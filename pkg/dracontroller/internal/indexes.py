"""Store indexes of the allocation controller: which claims an event about another object wakes.

Every watch answers "which claims does this change concern?" from an index, never by scanning:

* :data:`POD_BY_CLAIM` (Pods): ``namespace/claim`` of every claim an existing Pod references,
  finished Pods included (:mod:`~pkg.dracontroller.internal.eligibility` says why) — the
  eligibility rule "no Pod references it" and the Pod watch use it;
* :data:`CLAIM_PENDING` (claims): unallocated claims that are not the scheduler's, woken when
  capacity appears (a slice changes, an allocation is released);
* :data:`CLAIM_BY_CLASS` (claims): pending claims by every device class they name, woken when a
  class changes;
* :data:`CLAIM_OURS_BY_POOL` (claims): claims we allocated, by ``driver/pool`` of each device,
  woken when another allocation lands in the same pool (a possible collision).

The setup declares :data:`INDEXES` with the manager, which adds them to the Pod and claim informers
before the caches start (:mod:`pkg.framework.cache.indexer`); :data:`CLAIM_INDEXERS` and
:data:`POD_INDEXERS` are the same indexes for a store built by hand (tests, tools).
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
from pkg.framework.cache.indexer import Index, indexers_of
from pkg.framework.cache.store import Indexers
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

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


CLAIM_INDEXES: tuple[Index[Any], ...] = (
    Index(name=CLAIM_PENDING, kind=RESOURCE_CLAIM, func=_pending),
    Index(name=CLAIM_BY_CLASS, kind=RESOURCE_CLAIM, func=_by_class),
    Index(name=CLAIM_OURS_BY_POOL, kind=RESOURCE_CLAIM, func=_ours_by_pool),
)
POD_INDEXES: tuple[Index[Any], ...] = (Index(name=POD_BY_CLAIM, kind=POD, func=claims_of_pod),)
INDEXES = CLAIM_INDEXES + POD_INDEXES

CLAIM_INDEXERS: Indexers = indexers_of(CLAIM_INDEXES)
POD_INDEXERS: Indexers = indexers_of(POD_INDEXES)
