"""One Prepare or Unprepare of one claim, as its steps fill it in: the context of both pipelines.

The steps (:mod:`.prepare_steps`, :mod:`.unprepare_steps`) read what earlier steps left here and
add their own part; the driver (:mod:`.driver`) reads the outcome: the kubelet's ``answer``, or the
``error`` and the step it ``failed_at``, the ``note`` saying why a call ended early, the cards
whose mode changed, and the checkpoint as the call left it (the checkpoint's listeners follow it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.client import ResourceV1ResourceClaim

from pkg.backends.preparation import ContainerEdits
from pkg.framework.kubeletplugin.types import ClaimRef, PrepareOutcome
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord
from pkg.gpuhandler.preparation.kinds import ClaimWork, Offer
from pkg.gpuhandler.preparation.plan import ClaimPlan


@dataclass
class ClaimAttempt:
    """What one call did so far. ``offers`` and ``plan`` name the claim's devices in a failure's
    events even when planning itself was refused; ``record`` is the claim's record once
    ``record-started`` saved it (Prepare) or once it was found (Unprepare)."""

    claim: ClaimRef
    checkpoint: CheckpointData | None = None
    resource: ResourceV1ResourceClaim | None = None
    offers: tuple[Offer, ...] = ()
    plan: ClaimPlan | None = None
    # The driver's CDI device IDs (the base spec's or capability specs') by device (cdi_key), for
    # the devices a container uses.
    driver_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)
    record: ClaimRecord | None = None
    work: ClaimWork | None = None
    edits: dict[str, ContainerEdits] = field(default_factory=dict)  # by CDI device name (cdi_key)
    cdi_ids: dict[str, str] = field(default_factory=dict)
    answer: PrepareOutcome | None = None
    note: str = "done"
    changed_cards: set[str] = field(default_factory=set)
    error: Exception | None = None
    failed_at: str | None = None

    @property
    def label(self) -> str:
        return f"claim {self.claim.namespace}/{self.claim.name}"

    @property
    def cards(self) -> list[str]:
        """The claim's cards, as far as the call got to know them (for events)."""
        if self.plan is not None:
            return sorted({d.card for d in self.plan.devices})
        return sorted({o.card for o in self.offers})

    @property
    def device_type(self) -> str:
        """The first device's type, as far as the call got to know it (a metric label)."""
        if self.plan is not None and self.plan.devices:
            return self.plan.devices[0].device_type
        return self.offers[0].device_type if self.offers else "unknown"
