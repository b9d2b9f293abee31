"""The node-labels reconcile: its snapshot, its one step and the template that runs them.

The step makes a Node's gate labels say what its PhysicalGPUs say. A Node missing from the cache
(deleted) ends the pass before any step: there is nothing to label, and its PhysicalGPUs are the
physicalgpu controller's to clean up. A write happens only when a label differs, so the many passes
that change nothing (a card's status update) cost no request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import LABEL_VENDOR, PhysicalGPU, PhysicalGPUConditionType
from pkg.backends.registry import default_registry
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.reconcile import Handler, ObjectReconciler, Result, Snapshot
from pkg.framework.reconcile.conditions import is_true
from pkg.gpucontroller.names import GATE_VALUE, LABEL_DRIVER_READY, NVIDIA_VENDOR, vendor_present_label
from pkg.inventory.desired import label_changes

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeLabelsState(Snapshot):
    """One Node's labels and its PhysicalGPUs, read from the caches."""

    node_name: str
    labels: Mapping[str, str]
    gpus: tuple[PhysicalGPU, ...]


class NodeLabelWriter(Protocol):
    def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> None:
        """Sets (a value) or removes (``None``) exactly these labels of ``node``."""
        ...


def known_vendors() -> list[str]:
    """The vendor names the installed backends claim, NVIDIA's always among them (its validator
    depends on its label)."""
    return sorted({NVIDIA_VENDOR, *default_registry().vendor_names()})


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


def new_reconciler(
    *,
    gpus: SharedInformer[PhysicalGPU],
    nodes: SharedInformer[V1Node],
    handlers: Sequence[Handler[NodeLabelsState]],
) -> ObjectReconciler[V1Node, NodeLabelsState]:
    """Reads the Node and its cards from the caches; no writer: the step's writer patches."""

    def state(node: V1Node) -> NodeLabelsState:
        name = str(node.metadata.name) if node.metadata else ""
        return NodeLabelsState(
            node_name=name,
            labels=dict((node.metadata.labels if node.metadata else None) or {}),
            gpus=tuple(gpus.store.by_index(PHYSICAL_GPU_BY_NODE, name)),
        )

    return ObjectReconciler(get=lambda r: nodes.store.get_by_key(r.name), state=state, handlers=handlers)
