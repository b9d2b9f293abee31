"""The gpu-handler's answer to the kubelet: Prepare and Unprepare, one claim at a time, node-locked.

For each claim of a call: take the node lock (bounded wait), prepare (:mod:`.prepare`) or
unprepare (:mod:`.unprepare`) it, tell the VFIO holds (:mod:`.vfio_holds`) the checkpoint as the
call left it, release the lock; then count, time and report. A failure becomes that claim's error
for the kubelet (which retries with backoff), a ``Warning`` event on the claim and on the
PhysicalGPU of each card it was for, and a ``gpu_dra_prepare_failures_total`` sample; the other
claims of the call are unaffected. Cards whose mode changed are announced
(:class:`~pkg.gpuhandler.preparation.services.CardChanges`) after the lock is released, and the
health board is refreshed from the checkpoint, so the kubelet's health stream lists exactly the
prepared devices.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pkg.framework.kubeletplugin.types import ClaimRef, Driver, PrepareOutcome
from pkg.gpuhandler.node_lock import node_lock
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.failures import reason_of
from pkg.gpuhandler.preparation.prepare import Attempt, ClaimPreparer
from pkg.gpuhandler.preparation.services import CardChanges, ClaimEvents
from pkg.gpuhandler.preparation.unprepare import ClaimUnpreparer
from pkg.gpuhandler.preparation.vfio_holds import VfioHolds

logger = logging.getLogger(__name__)


class GpuDriver(Driver):
    def __init__(
        self,
        *,
        preparer: ClaimPreparer,
        unpreparer: ClaimUnpreparer,
        holds: VfioHolds,
        lock_path: Path,
        lock_timeout: float,
        events: ClaimEvents,
        cards: CardChanges,
        vendor: str,
        after_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._preparer = preparer
        self._unpreparer = unpreparer
        self._holds = holds
        self._lock_path = lock_path
        self._lock_timeout = lock_timeout
        self._events = events
        self._cards = cards
        self._vendor = vendor
        self._after_change = after_change
        self._clock = clock

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        outcomes = {}
        for claim in claims:
            attempt = self._locked(claim, "prepare", self._preparer.prepare)
            if attempt.error is None and attempt.answer is not None:
                outcomes[claim.uid] = attempt.answer
                continue
            error = attempt.error
            reason = reason_of(error) if error else "InternalError"
            message = f"claim {claim.namespace}/{claim.name}: {error or 'prepare failed'} (reason {reason})"
            plan = attempt.plan
            device_type = plan.devices[0].device_type.value if plan and plan.devices else "unknown"
            metrics.prepare_failures.labels(reason=reason, deviceType=device_type, vendor=self._vendor).inc()
            self._events.warning(claim, reason="PrepareFailed", message=message)
            for card in sorted({d.card for d in plan.devices} if plan else ()):
                self._events.card_warning(card, reason="PrepareFailed", message=message)
            outcomes[claim.uid] = PrepareOutcome.failed(message)
        return outcomes

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        errors = {}
        for claim in claims:
            attempt = self._locked(claim, "unprepare", self._unpreparer.unprepare)
            if attempt.error is None:
                errors[claim.uid] = ""
                continue
            message = f"claim {claim.namespace}/{claim.name}: unprepare failed: {attempt.error}"
            self._events.warning(claim, reason="UnprepareFailed", message=message)
            errors[claim.uid] = message
        return errors

    def _locked(self, claim: ClaimRef, operation: str, call: Callable[[ClaimRef], Attempt]) -> Attempt:
        started = self._clock()
        attempt: Attempt | None = None
        try:
            with node_lock(self._lock_path, timeout=self._lock_timeout):
                attempt = call(claim)
                if attempt.checkpoint is not None:
                    self._holds.update(attempt.checkpoint)
        except Exception as exc:  # the lock itself: time out or an unusable lock file
            attempt = attempt or Attempt(operation)
            attempt.error, attempt.failed_at = exc, "node-lock"
        ok = attempt.error is None
        outcome = "success" if ok else "failure"
        metrics.operation_seconds.labels(operation=operation, result=outcome).observe(self._clock() - started)
        log = logger.info if ok else logger.error
        log(
            "%s %s: %s",
            operation,
            outcome,
            attempt.error or attempt.note,
            exc_info=attempt.error,
            extra={
                "claim": f"{claim.namespace}/{claim.name}",
                "claim_uid": claim.uid,
                "step": attempt.failed_at,
            },
        )
        for card in sorted(attempt.changed_cards):
            self._cards.changed(card)
        self._after_change()
        return attempt
