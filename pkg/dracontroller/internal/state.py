"""The read-only snapshot one claim's reconcile works on.

Built once per reconcile from the cache (through the in-flight record), so the handlers judge one
consistent view of the claim: its eligibility verdict, whether we allocated it, whether a Pod
reserves it. The allocation inputs (slices, classes, other claims) are *not* in the snapshot:
the allocate and collision handlers read them under the decision lock, because a decision must
see every allocation made before it, including one made while this snapshot was built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.internal.collisions import is_reserved
from pkg.dracontroller.internal.eligibility import Verdict, is_allocated, judge
from pkg.dracontroller.internal.indexes import is_ours
from pkg.dracontroller.internal.service.cache_reader import CacheReader
from pkg.framework.keys import object_key
from pkg.framework.reconcile.handler import Snapshot


@dataclass(frozen=True)
class ClaimSnapshot(Snapshot):
    claim: ResourceV1ResourceClaim
    verdict: Verdict
    referencing_pods: tuple[str, ...]

    @property
    def key(self) -> str:
        return object_key(self.claim)

    @property
    def namespace(self) -> str:
        return (self.claim.metadata.namespace if self.claim.metadata else None) or ""

    @property
    def allocated(self) -> bool:
        return is_allocated(self.claim)

    @property
    def ours(self) -> bool:
        """Carries our allocated-by mark (with or without an allocation)."""
        return is_ours(self.claim)

    @property
    def reserved(self) -> bool:
        return is_reserved(self.claim)

    @property
    def being_deleted(self) -> bool:
        return self.claim.metadata is not None and self.claim.metadata.deletion_timestamp is not None


def state_factory(cache_reader: CacheReader) -> Callable[[ResourceV1ResourceClaim], ClaimSnapshot]:
    def build(claim: ResourceV1ResourceClaim) -> ClaimSnapshot:
        pods = tuple(cache_reader.referencing_pods(claim))
        verdict = judge(claim, classes=cache_reader.classes(), referencing_pods=pods)
        return ClaimSnapshot(claim=claim, verdict=verdict, referencing_pods=pods)

    return build
