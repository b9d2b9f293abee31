"""The only step: make the Node's gate labels say what its PhysicalGPUs say.

A Node missing from the cache (deleted) ends the pass: there is nothing to label, and its
PhysicalGPUs are the physicalgpu controller's to clean up. A write happens only when a label
differs, so the many passes that change nothing (a card's status update) cost no request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from api.gpu.v1alpha1 import LABEL_VENDOR, PhysicalGPU, PhysicalGPUConditionType
from pkg.framework.reconcile.conditions import is_true
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.names import GATE_VALUE, LABEL_DRIVER_READY, LABEL_NVIDIA_PRESENT, NVIDIA_VENDOR
from pkg.gpucontroller.nodelabels.internal.service import NodeLabelWriter
from pkg.gpucontroller.nodelabels.internal.state import NodeLabelsState
from pkg.inventory.desired import label_changes

logger = logging.getLogger(__name__)


def gate_labels(gpus: Iterable[PhysicalGPU]) -> dict[str, str | None]:
    """The gate labels a node with these PhysicalGPUs carries (``None``: the label is absent)."""
    cards = list(gpus)
    nvidia = any((gpu.metadata.labels or {}).get(LABEL_VENDOR) == NVIDIA_VENDOR for gpu in cards)
    ready = any(
        is_true(gpu.status.conditions if gpu.status else None, PhysicalGPUConditionType.DRIVER_READY)
        for gpu in cards
    )
    return {
        LABEL_NVIDIA_PRESENT: GATE_VALUE if nvidia else None,
        LABEL_DRIVER_READY: GATE_VALUE if ready else None,
    }


class GateLabelsHandler:
    name = "gate-labels"

    def __init__(self, *, writer: NodeLabelWriter) -> None:
        self._writer = writer

    def handle(self, state: NodeLabelsState) -> Result | None:
        changes = label_changes(state.labels, gate_labels(state.gpus))
        if changes:
            self._writer.patch_labels(state.node_name, changes)
            logger.info("patched Node gate labels", extra={"node": state.node_name, "labels": changes})
        return None
