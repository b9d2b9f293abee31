"""Nodes without a kubelet, for the local control plane.

The scheduler only needs a Node object that is Ready, untainted and has capacity; no kubelet runs
here, so this module plays the kubelet's part (status) and the node lifecycle controller's part
(lifting the not-ready taint admission puts on new Nodes).
"""

from __future__ import annotations

from kubernetes.client import V1Node, V1NodeCondition, V1NodeStatus, V1ObjectMeta

from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE


def create_ready_node(kube: KubeClient, name: str, *, labels: dict[str, str] | None = None) -> V1Node:
    """A schedulable Node with no kubelet behind it, marked Ready through its status subresource."""
    node = kube.create(NODE, V1Node(metadata=V1ObjectMeta(name=name, labels=labels or {})))
    node.status = V1NodeStatus(
        capacity={"cpu": "8", "memory": "32Gi", "pods": "110"},
        allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
        conditions=[
            V1NodeCondition(type="Ready", status="True", reason="KubeletReady", message="no kubelet")
        ],
    )
    node = kube.update_status(NODE, node)
    if node.spec is not None and node.spec.taints:
        node.spec.taints = None
        node = kube.update(NODE, node)
    return node
