"""The mapping both of the controller's watches share: an object -> the PhysicalGPUs on its node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ReferrersOf
from pkg.framework.reconcile import Request


def gpus_on_node(gpu_store: Store[PhysicalGPU], *, node_of: Callable[[Any], list[str]]) -> ReferrersOf:
    """The requests of the PhysicalGPUs on ``node_of(obj)`` (an index lookup, never a scan)."""

    def referrers(obj: Any) -> list[Request]:
        gpus = [gpu for node in node_of(obj) for gpu in gpu_store.by_index(PHYSICAL_GPU_BY_NODE, node)]
        return [Request(name=str(gpu.metadata.name)) for gpu in gpus]

    return referrers
