"""Names gpu-controller's controllers share: the node gate labels and the node components' labels.

The node gate labels are how the DaemonSets of the node components find their nodes
(docs/architecture.md#gate-labels-not-hostname-lists): gpu-controller keeps them on each Node from the node's
PhysicalGPUs (``nodelabels``), and the DaemonSets it renders (``orchestrator``) select nodes by them. A node
joining or leaving changes a label, never a Pod template, so no existing Pod of a DaemonSet is restarted by
it.

The component labels mark what the orchestrator owns; the validator's Pods are found by them
(``physicalgpu`` computes DriverReady from those Pods).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


def vendor_present_label(vendor: str) -> str:
    """``gpu.deckhouse.io/<vendor>.present``: ``true`` on a Node with at least one PhysicalGPU of
    ``vendor`` (its ``gpu.deckhouse.io/vendor`` label); what runs only for one vendor's cards (the
    NVIDIA validator, a vendor's own gpu-handler) selects nodes by it."""
    return f"gpu.deckhouse.io/{vendor}.present"


LABEL_NVIDIA_PRESENT: Final = vendor_present_label("nvidia")
"""``true`` on a Node with at least one NVIDIA PhysicalGPU: the GPU validator runs there, and the
NVIDIA gpu-handler too while a second vendor's gpu-handler runs beside it."""

LABEL_AMD_PRESENT: Final = vendor_present_label("amd")
"""``true`` on a Node with at least one AMD PhysicalGPU: the AMD gpu-handler runs there."""

LABEL_DRIVER_READY: Final = "gpu.deckhouse.io/driver-ready"
"""``true`` on a Node with a DriverReady PhysicalGPU, of any vendor: gpu-handler, nv-hostengine and
dcgm-exporter run there (a vendor's own gpu-handler where its ``<vendor>.present`` label is also set)."""

LABEL_CONTROL_PLANE: Final = "node-role.kubernetes.io/control-plane"
"""Nodes with this label run no gpu-node-agent: they hold no GPUs of ours."""

GATE_VALUE: Final = "true"

NVIDIA_VENDOR: Final = "nvidia"
"""The ``gpu.deckhouse.io/vendor`` label of NVIDIA PhysicalGPUs: the cards the validator checks."""


class Component(StrEnum):
    """The node components gpu-controller runs; the value names the DaemonSet and labels its Pods."""

    NODE_AGENT = "gpu-node-agent"
    VALIDATOR = "gpu-validator"
    GPU_HANDLER = "gpu-handler"
    GPU_HANDLER_AMD = "gpu-handler-amd"
    """gpu-handler with the AMD backend, beside the NVIDIA one: a DaemonSet of its own, since one
    DaemonSet has one Pod template and the two backends need different flags and host folders."""
    DCGM = "nv-hostengine"
    DCGM_EXPORTER = "dcgm-exporter"


LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_OPERATOR_CONFIG: Final = "gpu.deckhouse.io/operator-config"
"""The name of the configuration ConfigMap a DaemonSet was rendered from."""

MANAGED_BY: Final = "gpu-controller"
PART_OF: Final = "gpu-control-plane"

VALIDATOR_POD_SELECTOR: Final = (
    f"{LABEL_COMPONENT}={Component.VALIDATOR.value},{LABEL_MANAGED_BY}={MANAGED_BY}"
)
"""The label selector of the GPU validator's Pods (in the node components' namespace)."""

MANAGED_SELECTOR: Final = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
"""The label selector of everything the orchestrator rendered."""
