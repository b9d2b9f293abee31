"""Node events -> the PhysicalGPUs on that node.

Only a Node's appearance or disappearance changes what the controller decides (orphan cleanup
deletes the cards of a Node that is gone); a Node's status heartbeats would otherwise wake every
card of the node every few seconds, so no update passes.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.gpucontroller.physicalgpu.internal.watch.gpus_on_node import gpus_on_node


def node_name(node: V1Node) -> list[str]:
    return [str(node.metadata.name)] if node.metadata else []


def no_update(_old: Any, _new: Any) -> bool:
    return False


def node_watch(gpus: Store[PhysicalGPU]) -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=no_update, enqueuer=gpus_on_node(gpus, node_of=node_name))
