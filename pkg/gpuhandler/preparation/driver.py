"""The gpu-handler's answer to the kubelet: Prepare and Unprepare, one claim at a time, node-locked.

For each claim of a call: take the node lock (bounded wait), run the claim's pipeline, release the
lock; then count, time and report. A failure becomes that claim's error for the kubelet (which
retries with backoff), a ``Warning`` event on the claim and on the PhysicalGPU of each card it was
for, and a ``gpu_dra_prepare_failures_total``
sample; the other claims of the call are unaffected. Cards whose mode changed are announced
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
from pkg.framework.steptaker import PipelineResult, StepTaker
from pkg.gpuhandler.node_lock import node_lock
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.context import StepContext
from pkg.gpuhandler.preparation.failures import reason_of
from pkg.gpuhandler.preparation.services import CardChanges, ClaimEvents

logger = logging.getLogger(__name__)


class GpuDriver(Driver):
    def __init__(
        self,
        *,
        prepare: StepTaker[StepContext],
        unprepare: StepTaker[StepContext],
        lock_path: Path,
        lock_timeout: float,
        events: ClaimEvents,
        cards: CardChanges,
        vendor: str,
        after_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._prepare = prepare
        self._unprepare = unprepare
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
            ctx, result = self._run(self._prepare, claim, "prepare")
            if result is not None and result.ok and ctx.answer is not None:
                outcomes[claim.uid] = ctx.answer
                continue
            error = result.error if result is not None else None
            reason = reason_of(error) if error else "InternalError"
            message = f"claim {claim.namespace}/{claim.name}: {error or 'prepare failed'} (reason {reason})"
            device_type = (
                ctx.plan.devices[0].device_type.value if ctx.plan and ctx.plan.devices else "unknown"
            )
            metrics.prepare_failures.labels(reason=reason, deviceType=device_type, vendor=self._vendor).inc()
            self._events.warning(claim, reason="PrepareFailed", message=message)
            for card in sorted({d.card for d in ctx.plan.devices} if ctx.plan else ()):
                self._events.card_warning(card, reason="PrepareFailed", message=message)
            outcomes[claim.uid] = PrepareOutcome.failed(message)
        return outcomes

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        errors = {}
        for claim in claims:
            _ctx, result = self._run(self._unprepare, claim, "unprepare")
            if result is not None and result.ok:
                errors[claim.uid] = ""
                continue
            error = result.error if result is not None else None
            message = f"claim {claim.namespace}/{claim.name}: unprepare failed: {error}"
            self._events.warning(claim, reason="UnprepareFailed", message=message)
            errors[claim.uid] = message
        return errors

    def _run(
        self, pipeline: StepTaker[StepContext], claim: ClaimRef, operation: str
    ) -> tuple[StepContext, PipelineResult | None]:
        ctx = StepContext(claim=claim)
        started = self._clock()
        result: PipelineResult | None = None
        try:
            with node_lock(self._lock_path, timeout=self._lock_timeout):
                result = pipeline.run(ctx)
        except Exception as exc:  # the lock itself: time out or an unusable lock file
            result = PipelineResult(pipeline=pipeline.name, failed_step="node-lock", error=exc)
        outcome = "success" if result.ok else "failure"
        metrics.operation_seconds.labels(operation=operation, result=outcome).observe(self._clock() - started)
        log = logger.info if result.ok else logger.error
        log(
            "%s %s: %s",
            operation,
            outcome,
            result.stop_reason or result.error or "done",
            extra={
                "claim": f"{claim.namespace}/{claim.name}",
                "claim_uid": claim.uid,
                "step": result.failed_step,
            },
        )
        for card in sorted(ctx.changed_cards):
            self._cards.changed(card)
        self._after_change()
        return ctx, result
