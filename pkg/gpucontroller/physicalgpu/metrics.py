"""``gpu_physicalgpu_info`` and ``gpu_physicalgpu_condition`` computed at scrape time.

A custom collector rather than gauges updated by the reconciler: the cache already holds the
truth, and computing at scrape time cannot leave a stale series behind for a deleted card.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.gpu.v1alpha1 import LABEL_DEVICE, LABEL_NODE, LABEL_VENDOR, PhysicalGPUConditionType
from pkg.domain.metrics import NAMESPACE
from pkg.framework.reconcile.conditions import condition_status, find_condition

_ONLY_WHEN_SET = frozenset({PhysicalGPUConditionType.COMPUTE_DOMAINS_READY})

_STATUSES = ("True", "False", "Unknown")


class PhysicalGPUCollector(Collector):
    def __init__(self, store: Any) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            f"{NAMESPACE}_physicalgpu_info",
            "One series per PhysicalGPU with its identity labels.",
            labels=["name", "node", "vendor", "device", "pci_address", "driver_type"],
        )
        conditions = GaugeMetricFamily(
            f"{NAMESPACE}_physicalgpu_condition",
            "1 for the current status of each PhysicalGPU condition, 0 for the others.",
            labels=["name", "node", "condition", "status"],
        )
        for gpu in self._store.list():
            labels = gpu.metadata.labels or {}
            name, node = str(gpu.metadata.name), labels.get(LABEL_NODE, "")
            status = gpu.status
            pci = status.pci_info.address if status and status.pci_info else ""
            state = status.current_state if status else None
            driver = state.driver_type.value if state and state.driver_type else ""
            info.add_metric(
                [name, node, labels.get(LABEL_VENDOR, ""), labels.get(LABEL_DEVICE, ""), pci, driver], 1.0
            )
            for condition in PhysicalGPUConditionType:
                found = status.conditions if status else None
                if condition in _ONLY_WHEN_SET and find_condition(found or [], condition) is None:
                    continue  # a card in no multi-node fabric has no ComputeDomainsReady, not an Unknown one
                current = condition_status(found, condition)
                for value in _STATUSES:
                    conditions.add_metric([name, node, condition.value, value], float(current == value))
        yield info
        yield conditions

    def describe(self) -> Iterator[Metric]:
        return iter(())
