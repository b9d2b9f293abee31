"""Second step, for claims we allocated: give the allocation back if it collides with another.

See ``internal/collisions.py`` for what a collision is and who yields. Only a claim we allocated
and no Pod reserves yet ever yields: its devices are not in use, so taking them back harms no
one, and the next pass (the release wakes the claim again) allocates it from what is really free.
A claim without a collision ends the chain: it is allocated and nothing is left to do.

The check and the release are one locked operation of the decisions service, like an allocation,
so the check never judges against a world in which our own last write is missing.
"""

from __future__ import annotations

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.internal.collisions import must_yield
from pkg.dracontroller.internal.indexes import is_ours
from pkg.dracontroller.internal.names import REASON_REALLOCATING
from pkg.dracontroller.internal.service import CacheReader, Decisions, YieldCheck
from pkg.dracontroller.internal.state import ClaimSnapshot
from pkg.dracontroller.metrics import allocation_collisions
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result


def check_collision(claim: ResourceV1ResourceClaim, cache_reader: CacheReader) -> str | None:
    return must_yield(
        claim, allocated=cache_reader.allocated_claims(), pools=cache_reader.pools(), ours=is_ours
    )


class CollisionHandler:
    name = "collision"

    def __init__(
        self, *, decisions: Decisions, recorder: EventRecorderLogger, check: YieldCheck = check_collision
    ) -> None:
        self._decisions = decisions
        self._recorder = recorder
        self._check = check

    def handle(self, snapshot: ClaimSnapshot) -> Result | None:
        if not snapshot.allocated:
            return None
        if snapshot.reserved:
            raise StopHandlerChain(reason="allocated and reserved by a consumer")
        release = self._decisions.release_if_colliding(snapshot.claim, check=self._check)
        if release is None:
            raise StopHandlerChain(reason="allocated, no collision")
        if release.released is not None:
            allocation_collisions.inc()
            self._recorder.event(
                release.released,
                type_="Warning",
                reason=REASON_REALLOCATING,
                message=f"{release.reason}; gave the allocation back to allocate the claim again",
                kind=RESOURCE_CLAIM,
            )
        raise StopHandlerChain(Result(requeue=True), reason=f"released after a collision: {release.reason}")
