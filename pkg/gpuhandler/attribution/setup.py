"""The attribution's settings and its wiring into the gpu-handler's manager, and the claims' device
status (the status book, its loop and the kubelet plugin's reports into it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client import V1Pod

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import VendorBackend
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile.conditions import now_utc
from pkg.gpuhandler.attribution.claim_status import ClaimStatusWriter
from pkg.gpuhandler.attribution.metrics import AttributionCollector
from pkg.gpuhandler.attribution.runnable import AttributionLoop
from pkg.gpuhandler.attribution.sampler import DEFAULT_MAX_SERIES, Sampler
from pkg.gpuhandler.attribution.status_book import DeviceStatusBook
from pkg.gpuhandler.attribution.status_loop import DeviceStatusLoop
from pkg.gpuhandler.attribution.status_reports import BookStatusReports, card_names
from pkg.gpuhandler.attribution.usage_feed import UsageFeed
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord
from pkg.hardware.cgroups import read_cgroup

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttributionSettings:
    """``interval`` 0 turns attribution off; ``status_interval`` 0 keeps usage out of the claims."""

    interval: float = 10.0
    max_series: int = DEFAULT_MAX_SERIES
    status_interval: float = 30.0
    processes_proc: Path = Path("/proc")


def node_pods(*, informers: InformerFactory, node_name: str) -> Callable[[], list[V1Pod]]:
    """This node's Pods, by field selector: the load follows the node, not the cluster."""
    return informers.get_informer(POD, field_selector=f"spec.nodeName={node_name}").store.list


def setup_attribution(
    manager: Manager,
    *,
    settings: AttributionSettings,
    node_name: str,
    backend: VendorBackend,
    client: KubeClient,
    informers: InformerFactory,
    gpus: Callable[[], list[PhysicalGPU]],
    checkpoint: Callable[[], CheckpointData],
    book: DeviceStatusBook | None = None,
) -> AttributionCollector | None:
    """Registers the loop and its collector; ``None`` when turned off. The usage goes into the
    claims through ``book`` (none: metrics only)."""
    if settings.interval <= 0:
        logger.info("per-Pod attribution is turned off", extra={"node": node_name})
        return None
    pods = node_pods(informers=informers, node_name=node_name)

    def cards() -> dict[str, str]:
        found = {}
        for gpu in gpus():
            info = gpu.status.pci_info if gpu.status else None
            if info is not None and info.address and gpu.metadata.name:
                found[info.address] = gpu.metadata.name
        return found

    def prepared() -> Iterable[ClaimRecord]:
        return checkpoint().claims.values()

    sampler = Sampler(
        read_usage=backend.usage,
        cards=cards,
        prepared=prepared,
        pods=pods,
        cgroup=lambda pid: read_cgroup(settings.processes_proc, pid),
        now=now_utc,
        max_series=settings.max_series,
    )
    writer = None
    if settings.status_interval > 0 and book is not None:
        writer = UsageFeed(book=book, clock=time.monotonic, min_interval=settings.status_interval)
    collector = AttributionCollector()
    manager.metrics.register(collector)
    manager.add(
        AttributionLoop(sampler=sampler, collector=collector, writer=writer, interval=settings.interval)
    )
    return collector


def setup_device_status(
    manager: Manager,
    *,
    client: KubeClient,
    pool: str,
    tracker: HealthTracker,
    gpus: Callable[[], list[PhysicalGPU]],
    checkpoint: Callable[[], CheckpointData],
) -> tuple[DeviceStatusBook, BookStatusReports]:
    """The status book fed by the kubelet plugin (the reports returned), the health verdicts and
    the attribution (the book returned), and the loop that writes it."""
    book = DeviceStatusBook(verdicts=tracker.verdicts, now=now_utc)
    reports = BookStatusReports(book=book, cards=lambda: card_names(gpus()))
    tracker.subscribe(lambda address, _old, new: book.card_health(address, new))
    writer = ClaimStatusWriter(client=client, pool=pool, clock=time.monotonic)
    manager.add(DeviceStatusLoop(book=book, writer=writer, seed=lambda: reports.seed(checkpoint())))
    return book, reports
