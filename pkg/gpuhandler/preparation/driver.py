"""The gpu-handler's answer to the kubelet: Prepare and Unprepare, one claim at a time, node-locked.

For each claim of a call: check its identity (:func:`~.claim_ref.validate_claim_ref`), take the
node lock (bounded wait), run the Prepare or Unprepare pipeline (:mod:`.prepare_steps`,
:mod:`.unprepare_steps`) over it, tell the checkpoint's listener (the cards held for VMs, the
publisher's devices in use) the checkpoint as the call left it, release the lock; then count,
time and report. A failure becomes that claim's error
for the kubelet (which retries with backoff), a ``Warning`` event on the claim and on the
PhysicalGPU of each card it was for, and a ``gpu_dra_prepare_failures_total`` sample; the other
claims of the call are unaffected. Cards whose mode changed are announced
(:class:`~pkg.gpuhandler.preparation.services.CardChanges`) after the lock is released, and the
health board is refreshed from the checkpoint, so the kubelet's health stream lists exactly the
prepared devices. The outcome is also told to the claim's device status
(:class:`~pkg.gpuhandler.preparation.services.DeviceStatusReports`: ``Ready`` with the failure's
reason, the devices' identity, the entries' removal), which writes it off this thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pkg.backends.backend import BackendError
from pkg.framework.client import ApiError
from pkg.framework.kubeletplugin.types import ClaimRef, Driver, PrepareOutcome
from pkg.framework.steptaker import Pipeline
from pkg.gpuhandler.node_lock import NodeLockTimeoutError, node_lock
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.checkpoint import CheckpointError, ClaimRecord
from pkg.gpuhandler.preparation.claim_ref import validate_claim_ref
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.services import (
    CardChanges,
    CheckpointListener,
    ClaimEvents,
    DeviceKey,
    DeviceStatusReports,
    NoStatusReports,
)

logger = logging.getLogger(__name__)


class GpuDriver(Driver):
    def __init__(
        self,
        *,
        prepare: Pipeline[ClaimAttempt],
        unprepare: Pipeline[ClaimAttempt],
        listener: CheckpointListener,
        lock_path: Path,
        lock_timeout: float,
        events: ClaimEvents,
        cards: CardChanges,
        vendor: str,
        after_change: Callable[[], None] = lambda: None,
        status: DeviceStatusReports | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._prepare = prepare
        self._unprepare = unprepare
        self._listener = listener
        self._lock_path = lock_path
        self._lock_timeout = lock_timeout
        self._events = events
        self._cards = cards
        self._vendor = vendor
        self._after_change = after_change
        self._status = status or NoStatusReports()
        self._clock = clock

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        outcomes = {}
        for claim in claims:
            attempt = self._locked(claim, self._prepare)
            if attempt.error is None and attempt.answer is not None:
                outcomes[claim.uid] = attempt.answer
                if (record := _record_of(attempt)) is not None:
                    self._status.prepared(record)
                continue
            error = attempt.error
            reason = reason_of(error) if error else "InternalError"
            message = f"claim {claim.namespace}/{claim.name}: {error or 'prepare failed'} (reason {reason})"
            metrics.prepare_failures.labels(
                reason=reason, deviceType=attempt.device_type, vendor=self._vendor
            ).inc()
            self._events.warning(claim, reason="PrepareFailed", message=message)
            for card in attempt.cards:
                self._events.card_warning(card, reason="PrepareFailed", message=message)
            self._status.failed(
                claim, _devices_of(attempt), reason=reason, message=str(error or "prepare failed")
            )
            outcomes[claim.uid] = PrepareOutcome.failed(message)
        return outcomes

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        errors = {}
        for claim in claims:
            attempt = self._locked(claim, self._unprepare)
            if attempt.error is None:
                errors[claim.uid] = ""
                self._status.unprepared(claim)
                continue
            message = f"claim {claim.namespace}/{claim.name}: unprepare failed: {attempt.error}"
            self._events.warning(claim, reason="UnprepareFailed", message=message)
            errors[claim.uid] = message
        return errors

    def _locked(self, claim: ClaimRef, pipeline: Pipeline[ClaimAttempt]) -> ClaimAttempt:
        started = self._clock()
        operation = pipeline.name
        attempt = ClaimAttempt(claim)
        try:
            validate_claim_ref(claim)  # InvalidClaim before its UID reaches a path (claim_ref)
            with node_lock(self._lock_path, timeout=self._lock_timeout):
                fields = {"claim": f"{claim.namespace}/{claim.name}", "claim_uid": claim.uid}
                result = pipeline.run(attempt, log_fields=fields)
                attempt.error, attempt.failed_at = result.error, result.failed_at
                if attempt.checkpoint is not None:
                    self._listener(attempt.checkpoint)
        except PrepareFailedError as exc:  # an identity the API server never made
            attempt.error, attempt.failed_at = exc, "validate-claim"
        except Exception as exc:  # the lock itself: time out or an unusable lock file
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


def _record_of(attempt: ClaimAttempt) -> ClaimRecord | None:
    """The claim's record as the call left it: saved by this Prepare, or the recorded answer's."""
    if attempt.record is not None:
        return attempt.record
    return attempt.checkpoint.claims.get(attempt.claim.uid) if attempt.checkpoint is not None else None


def _devices_of(attempt: ClaimAttempt) -> list[DeviceKey] | None:
    """A failed claim's devices, as far as the call got: its plan, else its allocated offers."""
    if attempt.plan is not None:
        return [DeviceKey(d.pool, d.device, d.share_id) for d in attempt.plan.devices]
    if attempt.offers:
        return [DeviceKey(str(o.result.pool), o.name, o.result.share_id) for o in attempt.offers]
    return None


def reason_of(error: BaseException) -> str:
    """The ``reason`` of a failure, as a word a metric can carry: a step's own, or one for an error
    from below (the backend, an unreadable checkpoint, the node lock), never from message text."""
    if isinstance(error, PrepareFailedError | BackendError):
        return error.reason
    if isinstance(error, CheckpointError):
        return "CheckpointUnreadable"
    if isinstance(error, NodeLockTimeoutError):
        return "NodeLockTimeout"
    if isinstance(error, ApiError):
        return "ApiError"
    if isinstance(error, OSError):
        return "HostError"
    return "InternalError"
