"""Store indexes the PhysicalGPU controller reads, declared with the manager by its setup.

* :data:`POD_BY_NODE_INDEX` (the GPU validator's Pods): a reconcile looks up its node's validator
  Pods, and never lists Pods;
* :data:`~pkg.domain.indexes.PHYSICAL_GPU_BY_NODE_INDEX` (PhysicalGPUs, shared): a Node or a
  validator Pod wakes the cards on its node.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1Pod

from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE_INDEX
from pkg.framework.cache.indexer import Index
from pkg.framework.client.builtin_kinds import POD

POD_BY_NODE = "pod-by-node"


def pod_node(pod: V1Pod) -> list[str]:
    """The node a Pod is bound to (none while unscheduled)."""
    return [pod.spec.node_name] if pod.spec is not None and pod.spec.node_name else []


POD_BY_NODE_INDEX: Index[V1Pod] = Index(name=POD_BY_NODE, kind=POD, func=pod_node)

INDEXES: tuple[Index[Any], ...] = (PHYSICAL_GPU_BY_NODE_INDEX, POD_BY_NODE_INDEX)
