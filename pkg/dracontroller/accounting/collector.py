"""The accounting families, computed at scrape time, exported only by the leader.

* ``gpu_dra_allocation_seconds_total{class,deviceType,node,namespace}``: device-seconds allocated,
  from the last *persisted* ledger (see :mod:`.ledger` for why that keeps the counter
  monotonic across restarts and leader changes);
* ``gpu_dra_allocations_total{class,node,deviceType}``: device allocations made;
* ``gpu_dra_allocation_info{namespace,claim,pod,class,node,physicalgpu,dra_device,deviceType,
  profile,UUID,pci_address}`` = 1 for every device allocated now, from the claim cache. ``UUID``
  is the card's, spelled as the DCGM exporter's label, so
  ``gpu_dra_allocation_info * on(UUID) group_left() DCGM_FI_DEV_GPU_UTIL`` joins them; ``pod``
  lists the Pods reserving the claim (comma-separated). One series per claim and device: series
  disappear with the allocation, so cardinality is bounded by the devices allocated now.

Only the leader exports them: a follower's ledger is not current, and two replicas exporting the
same counter would double every ``sum()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pkg.domain.metrics import NAMESPACE
from pkg.dracontroller.accounting.devices import HeldDevice
from pkg.dracontroller.accounting.ledger import Ledger, Made, Usage

INFO_LABELS = (
    "namespace",
    "claim",
    "pod",
    "class",
    "node",
    "physicalgpu",
    "dra_device",
    "deviceType",
    "profile",
    "UUID",
    "pci_address",
)


class AccountingCollector(Collector):
    def __init__(self, *, held: Callable[[], Sequence[HeldDevice]]) -> None:
        self._held = held
        self._lock = threading.Lock()
        self._seconds: dict[Usage, float] | None = None
        self._made: dict[Made, int] = {}

    def publish(self, ledger: Ledger | None) -> None:
        """Exports ``ledger`` (already persisted) from now on; None stops exporting (not leading)."""
        with self._lock:
            self._seconds = ledger.seconds() if ledger is not None else None
            self._made = dict(ledger.made) if ledger is not None else {}

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            seconds, made = self._seconds, self._made
        if seconds is None:
            return
        family = CounterMetricFamily(
            f"{NAMESPACE}_dra_allocation_seconds",
            "Device-seconds allocated to claims of the driver, by class, device type, node, namespace.",
            labels=["class", "deviceType", "node", "namespace"],
        )
        for usage, value in sorted(seconds.items()):
            family.add_metric([usage.device_class, usage.device_type, usage.node, usage.namespace], value)
        yield family
        counts = CounterMetricFamily(
            f"{NAMESPACE}_dra_allocations",
            "Device allocations made for claims of the driver, by device class, node and device type.",
            labels=["class", "node", "deviceType"],
        )
        for made_by, count in sorted(made.items()):
            counts.add_metric([made_by.device_class, made_by.node, made_by.device_type], float(count))
        yield counts
        info = GaugeMetricFamily(
            f"{NAMESPACE}_dra_allocation_info",
            "1 for every device of the driver allocated now: who holds it and which card it is.",
            labels=list(INFO_LABELS),
        )
        seen = set()
        for device in self._held():
            f = device.facts
            labels = (
                device.namespace,
                device.claim,
                ",".join(device.pods),
                device.device_class,
                f.node,
                f.physical_gpu,
                device.device,
                f.device_type,
                f.profile,
                f.uuid,
                f.pci_address,
            )
            if labels not in seen:  # two shares of one device in one claim are one series
                seen.add(labels)
                info.add_metric(list(labels), 1.0)
        yield info

    def describe(self) -> Iterator[Metric]:
        return iter(())


__all__ = ["INFO_LABELS", "AccountingCollector"]
