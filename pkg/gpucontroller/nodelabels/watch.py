"""What wakes a Node's reconcile, and what does not.

A Node's own update wakes it only when one of the gate labels changed (someone removed it: put it
back), never for status heartbeats, and its deletion never (nothing is left to label). A PhysicalGPU
wakes its node when it appears, disappears, or its node, vendor or ``DriverReady`` changes.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, PhysicalGPU, PhysicalGPUConditionType
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.controller.predicate import Funcs
from pkg.framework.reconcile import Request
from pkg.framework.reconcile.conditions import condition_status
from pkg.gpucontroller.names import LABEL_DRIVER_READY, vendor_present_label
from pkg.gpucontroller.nodelabels.reconciler import known_vendors

GATE_LABELS = (*(vendor_present_label(v) for v in known_vendors()), LABEL_DRIVER_READY)


def gate_labels_changed(old: V1Node, new: V1Node) -> bool:
    def gates(node: V1Node) -> list[str | None]:
        labels = (node.metadata.labels if node.metadata else None) or {}
        return [labels.get(key) for key in GATE_LABELS]

    return gates(old) != gates(new)


def node_events() -> Funcs:
    """The predicate of the Node's own watch."""
    return Funcs(update=gate_labels_changed, delete=lambda _node: False)


def gate_inputs_changed(old: PhysicalGPU, new: PhysicalGPU) -> bool:
    """What the gate labels depend on: the card's node and vendor labels and its DriverReady."""

    def inputs(gpu: PhysicalGPU) -> tuple[Any, ...]:
        labels = gpu.metadata.labels or {}
        ready = condition_status(
            gpu.status.conditions if gpu.status else None, PhysicalGPUConditionType.DRIVER_READY
        )
        return labels.get(LABEL_NODE), labels.get(LABEL_VENDOR), ready

    return inputs(old) != inputs(new)


def node_of_gpu(gpu: PhysicalGPU) -> list[Request]:
    node = (gpu.metadata.labels or {}).get(LABEL_NODE)
    return [Request(name=node)] if node else []


def gpu_watch() -> ObjectRefWatch:
    """A card's changes wake the Node it names."""
    return ObjectRefWatch(update_filter=gate_inputs_changed, enqueuer=node_of_gpu)
