"""First step: stop unless this claim is ours to allocate or ours to watch over.

Two kinds of claims go on down the chain: an unallocated claim the eligibility rules accept
(next: allocate), and a claim *we* allocated (next: collision check). Everything else stops
here — the scheduler's claims, claims a Pod references, claims of other drivers' classes,
claims being deleted (their release is the kube-controller-manager's, see ``names.py``).

A claim declined because a Pod references it gets one ``Normal LeftToScheduler`` Event (per claim
and process, ``service/handover.py``), so a user can see why it is not allocated by us.

One repair happens on the way: an unallocated claim that still carries our allocated-by mark
(an interrupted write, or an allocation we released) loses the mark once the claim is not ours
to allocate, so that an allocation the scheduler makes later is never mistaken for ours.
"""

from __future__ import annotations

from pkg.dracontroller.internal.service import ClaimWrites, FoundBy, Handover
from pkg.dracontroller.internal.state import ClaimSnapshot
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result


class EligibilityHandler:
    name = "eligibility"

    def __init__(self, *, writer: ClaimWrites, handover: Handover) -> None:
        self._writer = writer
        self._handover = handover

    def handle(self, snapshot: ClaimSnapshot) -> Result | None:
        if snapshot.being_deleted:
            raise StopHandlerChain(reason="being deleted")
        if snapshot.allocated:
            if snapshot.ours:
                return None
            raise StopHandlerChain(reason="allocated by someone else")
        if snapshot.verdict.eligible:
            return None
        if snapshot.ours:
            self._writer.forget_mark(snapshot.claim)
        if snapshot.verdict.pods:
            self._handover.left_to_scheduler(snapshot.claim, snapshot.verdict.pods, found=FoundBy.CACHE)
        raise StopHandlerChain(reason=snapshot.verdict.reason)
