"""The gpu-handler's fields of a PhysicalGPU status, and whether the object already has them.

The enrichment owns exactly these, written by server-side apply with field manager
``gpu-handler`` on the status subresource:

* ``status.capabilities`` (the whole snapshot);
* ``status.currentState.nvidia`` and ``status.currentState.amd`` (never ``driverType``, which the
  node agent owns), each only for its vendor's cards;
* the ``HardwareHealthy`` and ``ComputeDomainsReady`` entries of ``status.conditions``.
  Conditions are a list map keyed by ``type``, so applying these entries merges them by key and
  leaves ``DriverReady`` and any other writer's conditions alone.

An apply owns precisely what it sends, so :meth:`OwnedStatus.apply_status` sends them all
together every time (omitting one deletes it: how ``ComputeDomainsReady`` leaves a card that is
no longer in a fabric). :func:`owned_of` projects the same fields out
of a cached object, so "nothing changed" is one comparison and an unchanged card costs no API
request. The conditions compare by meaning (status, reason, message, observedGeneration): its
``lastTransitionTime`` is carried over while the status stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes.client import V1Condition

from api.gpu.v1alpha1 import AmdState, Capabilities, NvidiaState, PhysicalGPU, PhysicalGPUConditionType
from pkg.backends.backend import CardVerdict
from pkg.framework.reconcile.conditions import (
    ConditionStatus,
    DesiredCondition,
    conditions_equal,
    find_condition,
    set_condition,
)


@dataclass(frozen=True, kw_only=True)
class OwnedStatus:
    capabilities: Capabilities | None = None
    nvidia: NvidiaState | None = None
    amd: AmdState | None = None
    health: V1Condition | None = None
    compute_domains: V1Condition | None = None

    def same_as(self, other: OwnedStatus) -> bool:
        return (
            _dump(self.capabilities) == _dump(other.capabilities)
            and _dump(self.nvidia) == _dump(other.nvidia)
            and _dump(self.amd) == _dump(other.amd)
            and conditions_equal(_listed(self.health), _listed(other.health))
            and conditions_equal(_listed(self.compute_domains), _listed(other.compute_domains))
        )

    def apply_status(self) -> dict[str, Any]:
        """The ``status`` of an apply body: every owned field that has a value."""
        status: dict[str, Any] = {}
        if self.capabilities is not None:
            status["capabilities"] = self.capabilities.to_api_dict()
        current = {
            key: block.to_api_dict()
            for key, block in (("nvidia", self.nvidia), ("amd", self.amd))
            if block is not None
        }
        if current:
            status["currentState"] = current
        conditions = [
            c.model_dump(by_alias=True, exclude_none=True, mode="json")
            for c in (self.health, self.compute_domains)
            if c is not None
        ]
        if conditions:
            status["conditions"] = conditions
        return status


def owned_of(gpu: PhysicalGPU) -> OwnedStatus:
    """The owned fields as ``gpu`` has them now."""
    status = gpu.status
    if status is None:
        return OwnedStatus()
    return OwnedStatus(
        capabilities=status.capabilities,
        nvidia=status.current_state.nvidia if status.current_state else None,
        amd=status.current_state.amd if status.current_state else None,
        health=find_condition(status.conditions, PhysicalGPUConditionType.HARDWARE_HEALTHY),
        compute_domains=find_condition(status.conditions, PhysicalGPUConditionType.COMPUTE_DOMAINS_READY),
    )


def health_condition(gpu: PhysicalGPU, report: CardVerdict, *, now: datetime) -> V1Condition:
    """``HardwareHealthy`` for ``report``: a new transition time only when the status changes."""
    conditions = [c.model_copy() for c in (gpu.status.conditions if gpu.status else None) or ()]
    desired = DesiredCondition(
        type=PhysicalGPUConditionType.HARDWARE_HEALTHY,
        status=ConditionStatus(report.status.value),
        reason=report.reason,
        message=report.message,
        observed_generation=gpu.metadata.generation,
    )
    set_condition(conditions, desired, now=now)
    found = find_condition(conditions, PhysicalGPUConditionType.HARDWARE_HEALTHY)
    if found is None:  # set_condition always leaves it there
        raise LookupError("HardwareHealthy missing after set_condition")
    return found


def _dump(model: Capabilities | NvidiaState | AmdState | None) -> dict[str, Any] | None:
    return None if model is None else model.to_api_dict()


def _listed(condition: V1Condition | None) -> list[V1Condition]:
    return [condition] if condition is not None else []
