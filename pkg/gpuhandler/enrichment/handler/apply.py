"""Step 4, apply: write the owned fields when they differ from the object, and only then.

For a readable card the desired fields are what this pass read, or, where a read failed, what the
object already has (an apply owns exactly what it sends, so a field left out would be deleted).
``currentState.nvidia`` is sent only while the card is bound to the NVIDIA driver, and
``currentState.amd`` only while it is bound to ``amdgpu`` (ROCm), whatever a backend returns,
because the CRD allows each only then. For a card that is not readable, the live
driver state is withdrawn and everything else stays (so too for a card held for VFIO). An
unchanged card costs no request.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import DriverType
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.owned import OwnedStatus, owned_of
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.enrichment.status_writer import StatusWriter


class ApplyHandler:
    name = "apply"

    def __init__(self, *, writer: StatusWriter) -> None:
        self._writer = writer

    def handle(self, state: EnrichmentState) -> Result | None:
        current = owned_of(state.gpu)
        if state.readiness in (Readiness.NOT_READY, Readiness.HELD):
            if current.nvidia is not None and self._writer.withdraw_nvidia(state.gpu) is not None:
                state.writes += 1
            if current.amd is not None and self._writer.withdraw_amd(state.gpu) is not None:
                state.writes += 1
            return None
        desired = self._desired(state, current)
        if not desired.same_as(current):
            self._writer.apply(state.gpu, desired)
            state.writes += 1
        return None

    @staticmethod
    def _desired(state: EnrichmentState, current: OwnedStatus) -> OwnedStatus:
        read = state.enrichment
        status = state.gpu.status
        bound = status.current_state.driver_type if status and status.current_state else None
        nvidia = read.nvidia if read is not None else current.nvidia
        amd = read.amd if read is not None else current.amd
        return OwnedStatus(
            capabilities=read.capabilities if read is not None else current.capabilities,
            nvidia=nvidia if bound is DriverType.NVIDIA else None,
            amd=amd if bound is DriverType.ROCM else None,
            health=state.health if state.health is not None else current.health,
            compute_domains=state.compute_domains,  # the compute-domains step kept or replaced it
        )
