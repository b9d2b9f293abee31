"""What integration and e2e tests read of a node's GPUs, the same way in both tiers: its cards'
DriverReady, its offers, its gate labels."""

from __future__ import annotations

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE, RESOURCE_SLICE
from pkg.gpucontroller.names import LABEL_DRIVER_READY, LABEL_NVIDIA_PRESENT
from testutil.k8s_fields import meta

GATES = (LABEL_NVIDIA_PRESENT, LABEL_DRIVER_READY)


def cards(kube: KubeClient, node: str) -> list[PhysicalGPU]:
    """The node's PhysicalGPUs."""
    items, _ = kube.list(PHYSICAL_GPU, label_selector=f"{LABEL_NODE}={node}")
    return items


def driver_ready(kube: KubeClient, node: str) -> set[tuple[str, str]]:
    """(status, reason) of DriverReady over the node's cards; ("missing", "") for a card without."""
    found = set()
    for gpu in cards(kube, node):
        conditions = (gpu.status.conditions if gpu.status else None) or []
        condition = next((c for c in conditions if c.type == "DriverReady"), None)
        found.add((condition.status, condition.reason) if condition else ("missing", ""))
    return found


def offers(kube: KubeClient, node: str) -> int:
    """How many devices our driver publishes for the node."""
    items, _ = kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node},spec.driver={DRIVER}")
    return sum(len(rs.spec.devices or []) for rs in items)


def gates(kube: KubeClient, node: str) -> dict[str, str]:
    """The node gate labels the Node carries."""
    labels = meta(kube.get(NODE, node)).labels or {}
    return {key: labels[key] for key in GATES if key in labels}
