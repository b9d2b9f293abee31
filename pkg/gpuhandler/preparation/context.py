"""The scratch state one claim's Prepare or Unprepare works on, step after step.

A :class:`StepContext` is created per claim and call, filled and read by the steps in order
(the StepTaker's contract: data flows through the context, outcomes only steer). It is *scratch*:
steps write into it, and a step that needs what an earlier step found says so with
:meth:`StepContext.require`, so a wrongly ordered pipeline fails loudly naming both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from kubernetes.client import ResourceV1ResourceClaim

from pkg.backends.preparation import ContainerEdits
from pkg.framework.kubeletplugin.types import ClaimRef, PrepareOutcome
from pkg.gpuhandler.preparation.checkpoint import CheckpointData
from pkg.gpuhandler.preparation.plan import ClaimPlan

T = TypeVar("T")


class StepOrderError(RuntimeError):
    """A step ran before the step that provides what it needs (a bug in the pipeline)."""


@dataclass
class StepContext:
    claim: ClaimRef
    checkpoint: CheckpointData | None = None
    resource: ResourceV1ResourceClaim | None = None  # the claim as read by ``plan``
    plan: ClaimPlan | None = None
    edits: dict[str, ContainerEdits] = field(default_factory=dict)  # by DRA device name
    cdi_device_ids: dict[str, str] = field(default_factory=dict)  # by DRA device name
    found_mig_modes: dict[str, bool] = field(default_factory=dict)  # card -> MIG mode before this run
    changed_cards: set[str] = field(default_factory=set)  # cards whose mode this run changed
    answer: PrepareOutcome | None = None

    def require(self, value: T | None, what: str, step: str) -> T:
        if value is None:
            raise StepOrderError(f"step {step!r} needs {what}, which no earlier step provided")
        return value
