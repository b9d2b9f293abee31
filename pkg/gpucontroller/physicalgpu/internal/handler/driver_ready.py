"""``DriverReady`` from the GPU validator's Pod on the card's node
(docs/architecture.md#driverready-from-the-validator).

The verdict (:mod:`..validator`) is computed from the Pod cache on every pass and written into the
working copy; the status write is a server-side apply of only the conditions gpu-controller owns
(:mod:`..status_writer`), so gpu-handler's ``HardwareHealthy`` is never part of the request and
cannot be overwritten. Cards no validator judges (another vendor's, which has none) are
DriverReady when bound to their vendor's own kernel driver (:func:`binding_verdict`); cards of a
vendor no installed backend claims are left to
:mod:`.default_conditions`.

An Event is recorded when the status changes (True, False, Unknown), never on a pass that only
restates it, and only once the write succeeded (``after_write``), so a conflicting write that is
retried does not announce the same transition twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from api.gpu.v1alpha1 import DriverType, PhysicalGPU, PhysicalGPUConditionType
from pkg.backends.registry import default_registry
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
from pkg.gpucontroller.physicalgpu.internal.validator import Verdict, node_verdict

REASON_DRIVER_BOUND = "DriverBound"
REASON_DRIVER_NOT_BOUND = "DriverNotBound"
EVENT_REASONS = {
    ConditionStatus.TRUE: "DriverReady",
    ConditionStatus.FALSE: "DriverNotReady",
    ConditionStatus.UNKNOWN: "DriverReadyUnknown",
}


def binding_verdict(gpu: PhysicalGPU) -> Verdict | None:
    """``DriverReady`` of a card no validator judges, from the kernel driver it is bound to: True
    when that is its vendor's own driver (``amdgpu`` for AMD: the driver that makes its device
    nodes), False when it is another (``vfio-pci``) or none. ``None`` when no installed vendor
    backend claims the card: nobody can say, and the default conditions keep it Unknown."""
    info = gpu.status.pci_info if gpu.status else None
    identity = default_registry().by_pci_vendor(info.vendor.id) if info else None
    if identity is None:
        return None
    own = {t for t in identity.driver_types.values() if t is not DriverType.VFIO}
    state = gpu.status.current_state if gpu.status else None
    bound = state.driver_type if state else None
    if bound in own:
        return Verdict(ConditionStatus.TRUE, REASON_DRIVER_BOUND, f"bound to its vendor's driver ({bound})")
    return Verdict(
        ConditionStatus.FALSE,
        REASON_DRIVER_NOT_BOUND,
        f"bound to {bound}, not to its vendor's driver" if bound else "no kernel driver is bound",
    )


class DriverReadyHandler:
    name = "driver-ready"

    def __init__(self, *, recorder: EventRecorderLogger, now: Callable[[], datetime] = now_utc) -> None:
        self._recorder = recorder
        self._now = now

    def handle(self, state: PhysicalGPUState) -> Result | None:
        if state.node_name is None:
            return None
        if state.validated_by_validator:
            verdict = node_verdict(state.validator_pods, state.node_name)
        elif (bound := binding_verdict(state.gpu)) is not None:
            verdict = bound
        else:
            return None
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
        judged = state.validated_by_validator or binding_verdict(state.resource.original) is not None
        if state.resource.is_empty() or not judged:
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
