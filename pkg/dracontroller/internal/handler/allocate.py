"""Last step: allocate an eligible claim and write the result, or say why it cannot be done.

The decisions service (``service/decisions.py``) decides under its lock and writes outside it, the
devices reserved meanwhile: the allocator sees every allocation this process made or is writing,
including ones the watch has not delivered yet. The allocator (best fit) returns either the
``status.allocation`` to write or an ``Unschedulable``, whose ``kind`` is the ``reason`` label of
``gpu_dra_allocation_failures_total``:

* allocated → the writer marks and allocates the claim with compare-and-swap writes, then a
  ``Normal Allocated`` event lists the devices and the node;
* not fatal (no capacity now, a pool being republished, search limit) → ``Warning
  AllocationFailed`` that leads with the first cause in the user's words (``explain``'s verdict),
  then the allocator's reason and an explain summary of the attempt that failed (how many devices
  matched, what stopped them; diagnosed from the attempt's recorded inputs, not by allocating
  again), and a requeue with the controller's backoff; slice, class and claim events
  wake the claim sooner;
* fatal (a broken selector, an unknown class, admin access outside an admin namespace) → the
  same event, no requeue: only a change of the class, claim or namespace can help, and those
  changes wake the claim.

A write conflict propagates as ``ConflictRequeue``: the reconciler requeues without an event.

A Pod that references the claim and that the Pod cache did not show when the claim was judged
(found by the decisions service's check as of the claim's version, before or right after the
write) ends the chain with the ``LeftToScheduler`` Event and
``gpu_dra_pod_reference_races_total{when}``; no requeue: the Pod's arrival in the cache wakes the
claim, and from then on eligibility declines it. When the check after the write had to be left
pending (the Pod cache was not past the written version yet), the claim is requeued for
``AfterWriteHandler`` (``after_write.py``) to finish it.
"""

from __future__ import annotations

import time
from datetime import timedelta

from pkg.dra.allocator import AllocationAttempt, Allocator, explain
from pkg.dra.explain.causes import verdict_of
from pkg.dra.explain.event_text import event_message
from pkg.dra.explain.render import describe_allocation
from pkg.dra.model import Unschedulable
from pkg.dracontroller import metrics
from pkg.dracontroller.internal.names import REASON_ALLOCATED, REASON_ALLOCATION_FAILED
from pkg.dracontroller.internal.service import Decisions, FoundBy, Handover
from pkg.dracontroller.internal.state import ClaimSnapshot
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import ConflictRequeue, StopHandlerChain
from pkg.framework.reconcile.contract import Result


def failure_reason(outcome: Unschedulable) -> str:
    """The ``reason`` label of ``gpu_dra_allocation_failures_total`` for an outcome."""
    return outcome.kind.value


class AllocateHandler:
    name = "allocate"

    def __init__(
        self, *, decisions: Decisions, recorder: EventRecorderLogger, allocator: Allocator, handover: Handover
    ) -> None:
        self._decisions = decisions
        self._recorder = recorder
        self._allocator = allocator  # the one that took the attempt: it explains a failure
        self._handover = handover

    def handle(self, snapshot: ClaimSnapshot) -> Result | None:
        if snapshot.allocated:
            return None
        started = time.monotonic()
        try:
            decision = self._decisions.allocate(snapshot.claim, namespace=snapshot.namespace)
        except ConflictRequeue:
            metrics.allocation_failures.labels(reason="conflict").inc()
            raise
        outcome = decision.outcome
        if isinstance(outcome, Unschedulable):
            return self._failed(snapshot, outcome, decision.attempt)
        if decision.referenced_by:
            found = FoundBy.READ_AFTER_WRITE if decision.given_back else FoundBy.READ_BEFORE_WRITE
            metrics.pod_reference_races.labels(when=found.value).inc()
            self._handover.left_to_scheduler(snapshot.claim, decision.referenced_by, found=found)
            raise StopHandlerChain(
                reason=f"referenced by pod {decision.referenced_by[0]} ({found.value} read)"
            )
        if decision.written is None:
            raise StopHandlerChain(reason="claim deleted before its allocation was written")
        metrics.allocation_latency.observe(time.monotonic() - started)
        self._recorder.event(
            decision.written,
            type_="Normal",
            reason=REASON_ALLOCATED,
            message=f"allocated {describe_allocation(outcome)}",
            kind=RESOURCE_CLAIM,
        )
        if decision.check_pending:
            return Result(requeue_after=timedelta(seconds=0.05))
        return None

    def _failed(
        self, snapshot: ClaimSnapshot, outcome: Unschedulable, attempt: AllocationAttempt
    ) -> Result | None:
        metrics.allocation_failures.labels(reason=failure_reason(outcome)).inc()
        trace = explain(attempt, allocator=self._allocator)  # the attempt taken, not a second one
        # The Event is read in the claim's namespace: holders elsewhere are counted, not named.
        verdict = verdict_of(trace, attempt.inputs, readable=snapshot.namespace.__eq__)
        self._recorder.event(
            snapshot.claim,
            type_="Warning",
            reason=REASON_ALLOCATION_FAILED,
            message=event_message(trace, verdict),
            kind=RESOURCE_CLAIM,
        )
        return None if outcome.fatal else Result(requeue=True)
