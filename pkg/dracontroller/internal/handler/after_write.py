"""Second step, for claims we allocated: finish the Pod check the allocation left pending.

The check "does a Pod reference this claim" is repeated as of the version we wrote
(``service/decisions.py``). When the Pod cache had not reached that version yet, the decision left
it pending rather than wait under the decision lock; this handler makes it on every later pass of
the claim — requeued with a backoff, and woken sooner by any Pod that starts referencing the claim —
until it is done. A Pod found then gets the allocation given back (``after-write`` in
``gpu_dra_pod_reference_races_total``, a ``LeftToScheduler`` Event) and the chain ends; otherwise the
claim goes on to the collision check.
"""

from __future__ import annotations

from datetime import timedelta

from pkg.dracontroller import metrics
from pkg.dracontroller.internal.service import Decisions, FoundBy, Handover
from pkg.dracontroller.internal.state import ClaimSnapshot
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result


class AfterWriteHandler:
    name = "after-write"

    def __init__(self, *, decisions: Decisions, handover: Handover) -> None:
        self._decisions = decisions
        self._handover = handover

    def handle(self, snapshot: ClaimSnapshot) -> Result | None:
        if not snapshot.allocated:
            return None
        check = self._decisions.check_after_write(snapshot.claim, reserved=snapshot.reserved)
        if check is None or (check.retry_in is None and not check.given_back):
            return None
        if check.retry_in is not None:
            raise StopHandlerChain(
                Result(requeue_after=timedelta(seconds=check.retry_in)),
                reason="Pod cache not yet past the allocation written",
            )
        metrics.pod_reference_races.labels(when=FoundBy.READ_AFTER_WRITE.value).inc()
        self._handover.left_to_scheduler(
            check.released or snapshot.claim, check.referenced_by, found=FoundBy.READ_AFTER_WRITE
        )
        raise StopHandlerChain(reason=f"referenced by pod {check.referenced_by[0]} (after-write check)")
