"""``DriverReady`` from the GPU validator's Pod on the card's node
(docs/architecture.md#driverready-from-the-validator).

The verdict (:mod:`..validator`) is computed from the Pod cache on every pass and written into the
working copy; the status write is a server-side apply of only the conditions gpu-controller owns
(:mod:`..status_writer`), so gpu-handler's ``HardwareHealthy`` is never part of the request and
cannot be overwritten. Cards no validator judges (another vendor's) are left to
:mod:`.default_conditions`.

An Event is recorded when the status changes (True, False, Unknown), never on a pass that only
restates it, and only once the write succeeded (``after_write``), so a conflicting write that is
retried does not announce the same transition twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from api.gpu.v1alpha1 import PhysicalGPUConditionType
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.conditions import (
    ConditionStatus,
    DesiredCondition,
    condition_status,
    find_condition,
    now_utc,
    set_condition,
)
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState
from pkg.gpucontroller.physicalgpu.internal.validator import node_verdict

EVENT_REASONS = {
    ConditionStatus.TRUE: "DriverReady",
    ConditionStatus.FALSE: "DriverNotReady",
    ConditionStatus.UNKNOWN: "DriverReadyUnknown",
}


class DriverReadyHandler:
    name = "driver-ready"

    def __init__(self, *, recorder: EventRecorderLogger, now: Callable[[], datetime] = now_utc) -> None:
        self._recorder = recorder
        self._now = now

    def handle(self, state: PhysicalGPUState) -> Result | None:
        if not state.validated_by_validator or state.node_name is None:
            return None
        verdict = node_verdict(state.validator_pods, state.node_name)
        status = state.status
        conditions = list(status.conditions or [])
        desired = DesiredCondition(
            type=PhysicalGPUConditionType.DRIVER_READY,
            status=verdict.status,
            reason=verdict.reason,
            message=verdict.message,
            observed_generation=state.resource.original.metadata.generation,
        )
        if set_condition(conditions, desired, now=self._now()):
            status.conditions = conditions
        return None

    def after_write(self, state: PhysicalGPUState) -> None:
        if state.resource.is_empty() or not state.validated_by_validator:
            return
        gpu = state.resource.original  # what the server stored
        conditions = gpu.status.conditions if gpu.status else None
        now = condition_status(conditions, PhysicalGPUConditionType.DRIVER_READY)
        if now is state.driver_ready_before:
            return
        condition = find_condition(conditions, PhysicalGPUConditionType.DRIVER_READY)
        self._recorder.event(
            gpu,
            type_="Warning" if now is ConditionStatus.FALSE else "Normal",
            reason=EVENT_REASONS[now],
            message=(
                f"DriverReady {state.driver_ready_before.value} -> {now.value}: "
                f"{condition.message if condition else ''}"
            ),
        )
