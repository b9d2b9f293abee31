"""State and steps of the labeler: every PhysicalGPU carries ``example.deckhouse.io/seen=true``."""

from __future__ import annotations

from dataclasses import dataclass

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.framework.reconcile import Resource, Result, Snapshot

LABEL = "example.deckhouse.io/seen"


@dataclass(frozen=True)
class LabelerState(Snapshot):
    resource: Resource[PhysicalGPU, PhysicalGPUStatus]


class SeenLabelHandler:
    name = "seen-label"

    def handle(self, state: LabelerState) -> Result | None:
        gpu = state.resource.changed()  # the working copy; the template writes what changed
        gpu.metadata.labels = {**(gpu.metadata.labels or {}), LABEL: "true"}
        return None
