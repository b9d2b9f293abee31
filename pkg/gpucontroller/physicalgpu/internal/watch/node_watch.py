"""Node events → the PhysicalGPUs on that node.

Only a Node's appearance or disappearance changes what the controller decides (orphan cleanup),
so updates are filtered out: Node status heartbeats would otherwise wake every GPU of the node
every few seconds.
"""

from __future__ import annotations

from typing import Any

from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile.contract import Request


def node_watch(gpu_store: Store[Any]) -> ObjectRefWatch:
    def gpus_on_node(obj: Any) -> list[Request]:
        gpus = gpu_store.by_index(PHYSICAL_GPU_BY_NODE, str(obj.metadata.name))
        return [Request(name=str(gpu.metadata.name)) for gpu in gpus]

    return ObjectRefWatch(update_filter=lambda _old, _new: False, enqueuer=gpus_on_node)
