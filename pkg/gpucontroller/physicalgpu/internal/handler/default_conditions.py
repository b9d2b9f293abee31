"""Gives every PhysicalGPU the conditions every card has, Unknown until their owners report.

Readers (the gpu-handler's publisher, kubectl's printer columns, alerts) can then tell "not
validated yet" from "validation failed" without special-casing a missing condition. The handler
only adds missing conditions: ``HardwareHealthy`` belongs to gpu-handler once it has written it,
``DriverReady`` of NVIDIA cards to :mod:`.driver_ready` (which runs first); this step seeds what
nobody has written yet, such as ``DriverReady`` of a card no validator judges.
``ComputeDomainsReady`` is not seeded: gpu-handler sets it only on a card in a multi-node NVLink
fabric, and its absence says the card is in none.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from api.gpu.v1alpha1 import PhysicalGPUConditionType
from pkg.framework.reconcile.conditions import (
    ConditionStatus,
    DesiredCondition,
    find_condition,
    now_utc,
    set_condition,
)
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState

REASON_VALIDATION_PENDING = "ValidationPending"
SEEDED = (PhysicalGPUConditionType.DRIVER_READY, PhysicalGPUConditionType.HARDWARE_HEALTHY)


class DefaultConditionsHandler:
    name = "default-conditions"

    def __init__(self, *, now: Callable[[], datetime] = now_utc) -> None:
        self._now = now

    def handle(self, state: PhysicalGPUState) -> Result | None:
        status = state.status
        conditions = list(status.conditions or [])
        for condition_type in SEEDED:
            if find_condition(conditions, condition_type) is not None:
                continue
            set_condition(
                conditions,
                DesiredCondition(
                    type=condition_type,
                    status=ConditionStatus.UNKNOWN,
                    reason=REASON_VALIDATION_PENDING,
                    message="waiting for the GPU validator to report",
                    observed_generation=state.resource.original.metadata.generation,
                ),
                now=self._now(),
            )
        if len(conditions) != len(status.conditions or []):
            status.conditions = conditions
        return None
