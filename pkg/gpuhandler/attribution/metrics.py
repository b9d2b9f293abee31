"""The attribution's series, served from the last sample: a scrape never calls the vendor library.

Per process row (:mod:`.sampler`), labels ``namespace, pod, container, claim, physicalgpu, UUID,
attribution`` (``UUID`` spelled like the DCGM exporter's label, so the two join):

* ``gpu_process_memory_bytes``: GPU memory the container's processes hold (absent where the
  driver gives no figure);
* ``gpu_process_sm_utilization_ratio``: their share of the device's SMs over the last interval,
  0 to 1 (absent where the driver samples none: MIG devices);
* ``gpu_process_count`` and ``gpu_process_energy_joules_total`` (the row's share of the card's
  energy since the row appeared; a counter that ends with the row).

Per device this node prepared, labels ``namespace, claim, dra_device, physicalgpu, UUID``:
``gpu_dra_device_memory_used_bytes`` and ``gpu_dra_device_processes`` — zero while idle, present
from the moment Prepare made the device. And the pass itself: ``gpu_attribution_rows_folded``
(rows over the cap), ``gpu_attribution_last_sample_timestamp_seconds``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pkg.domain.metrics import NAMESPACE
from pkg.gpuhandler.attribution.sampler import UsageSample

ROW_LABELS = ["namespace", "pod", "container", "claim", "physicalgpu", "UUID", "attribution"]
DEVICE_LABELS = ["namespace", "claim", "dra_device", "physicalgpu", "UUID"]


class AttributionCollector(Collector):
    """Holds the last sample (:meth:`publish`) and answers scrapes from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sample: UsageSample | None = None

    def publish(self, sample: UsageSample) -> None:
        with self._lock:
            self._sample = sample

    def latest(self) -> UsageSample | None:
        with self._lock:
            return self._sample

    def collect(self) -> Iterator[Metric]:
        sample = self.latest()
        memory = GaugeMetricFamily(
            f"{NAMESPACE}_process_memory_bytes",
            "GPU memory held by a container's processes.",
            labels=ROW_LABELS,
        )
        sm = GaugeMetricFamily(
            f"{NAMESPACE}_process_sm_utilization_ratio",
            "Share of the device's SMs a container's processes kept busy over the last interval (0-1).",
            labels=ROW_LABELS,
        )
        count = GaugeMetricFamily(
            f"{NAMESPACE}_process_count", "Processes of a container on the device.", labels=ROW_LABELS
        )
        energy = CounterMetricFamily(
            f"{NAMESPACE}_process_energy_joules",
            "A container's share of the card's energy since its processes appeared on it.",
            labels=ROW_LABELS,
        )
        device_memory = GaugeMetricFamily(
            f"{NAMESPACE}_dra_device_memory_used_bytes",
            "GPU memory held by the processes of the Pods holding a prepared device.",
            labels=DEVICE_LABELS,
        )
        device_processes = GaugeMetricFamily(
            f"{NAMESPACE}_dra_device_processes",
            "Processes of the Pods holding a prepared device that run on it.",
            labels=DEVICE_LABELS,
        )
        folded = GaugeMetricFamily(
            f"{NAMESPACE}_attribution_rows_folded",
            "Process rows folded into attribution=capped rows by the series cap in the last pass.",
        )
        taken = GaugeMetricFamily(
            f"{NAMESPACE}_attribution_last_sample_timestamp_seconds", "When the last attribution pass ran."
        )
        if sample is not None:
            for row in sample.rows:
                k = row.key
                labels = [k.namespace, k.pod, k.container, k.claim, k.physicalgpu, k.uuid, k.attribution]
                count.add_metric(labels, row.processes)
                energy.add_metric(labels, row.energy_joules)
                if row.memory_bytes is not None:
                    memory.add_metric(labels, row.memory_bytes)
                if row.sm_percent is not None:
                    sm.add_metric(labels, row.sm_percent / 100)
            for device in sample.devices:
                rows = sample.rows_of(device)
                labels = [device.namespace, device.claim, device.device, device.physicalgpu, device.uuid]
                device_memory.add_metric(labels, sum(r.memory_bytes or 0 for r in rows))
                device_processes.add_metric(labels, sum(r.processes for r in rows))
            folded.add_metric([], sample.folded)
            taken.add_metric([], sample.taken_at.timestamp())
        yield from (memory, sm, count, energy, device_memory, device_processes, folded, taken)

    def describe(self) -> Iterator[Metric]:
        return iter(())
