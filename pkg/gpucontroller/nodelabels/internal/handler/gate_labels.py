"""The only step: make the Node's gate labels say what its PhysicalGPUs say.

A Node missing from the cache (deleted) ends the pass: there is nothing to label, and its
PhysicalGPUs are the physicalgpu controller's to clean up. A write happens only when a label
differs, so the many passes that change nothing (a card's status update) cost no request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from api.gpu.v1alpha1 import LABEL_VENDOR, PhysicalGPU, PhysicalGPUConditionType
from pkg.backends.registry import default_registry
from pkg.framework.reconcile.conditions import is_true
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.names import GATE_VALUE, LABEL_DRIVER_READY, NVIDIA_VENDOR, vendor_present_label
from pkg.gpucontroller.nodelabels.internal.service import NodeLabelWriter
from pkg.gpucontroller.nodelabels.internal.state import NodeLabelsState
from pkg.inventory.desired import label_changes

logger = logging.getLogger(__name__)


def gate_labels(gpus: Iterable[PhysicalGPU], vendors: Iterable[str] | None = None) -> dict[str, str | None]:
    """The gate labels a node with these PhysicalGPUs carries (``None``: the label is absent): one
    ``<vendor>.present`` per vendor of ``vendors`` (default: every installed vendor backend's name)
    and ``driver-ready``."""
    cards = list(gpus)
    present = {(gpu.metadata.labels or {}).get(LABEL_VENDOR) for gpu in cards}
    ready = any(
        is_true(gpu.status.conditions if gpu.status else None, PhysicalGPUConditionType.DRIVER_READY)
        for gpu in cards
    )
    labels: dict[str, str | None] = {
        vendor_present_label(vendor): GATE_VALUE if vendor in present else None
        for vendor in (known_vendors() if vendors is None else vendors)
    }
    return labels | {LABEL_DRIVER_READY: GATE_VALUE if ready else None}


def known_vendors() -> list[str]:
    """The vendor names the installed backends claim, NVIDIA's always among them (its validator
    depends on its label)."""
    return sorted({NVIDIA_VENDOR, *default_registry().vendor_names()})


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
