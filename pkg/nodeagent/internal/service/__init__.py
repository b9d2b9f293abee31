"""I/O of the node agent: the API server and the cache barrier (pkg.inventory reads the hardware)."""

from pkg.nodeagent.internal.service.cache_barrier import CacheBarrier
from pkg.nodeagent.internal.service.kube_writer import (
    FIELD_MANAGER,
    CacheWaiter,
    GPUWriter,
    KubeWriter,
    NodeWriter,
)

__all__ = [
    "FIELD_MANAGER",
    "CacheBarrier",
    "CacheWaiter",
    "GPUWriter",
    "KubeWriter",
    "NodeWriter",
]
