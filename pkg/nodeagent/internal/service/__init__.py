"""I/O of the node agent: sysfs, host files and the API server, each behind a Protocol."""

from pkg.nodeagent.internal.service.cache_barrier import CacheBarrier
from pkg.nodeagent.internal.service.host_info import FileHostInfoReader, HostInfoReader
from pkg.nodeagent.internal.service.kube_writer import (
    FIELD_MANAGER,
    CacheWaiter,
    GPUWriter,
    KubeWriter,
    NodeWriter,
)
from pkg.nodeagent.internal.service.pci_scanner import PciScan, PciScanner, SysfsPciScanner

__all__ = [
    "FIELD_MANAGER",
    "CacheBarrier",
    "CacheWaiter",
    "FileHostInfoReader",
    "GPUWriter",
    "HostInfoReader",
    "KubeWriter",
    "NodeWriter",
    "PciScan",
    "PciScanner",
    "SysfsPciScanner",
]
