"""Metrics of device allocation, exported by gpu-dra-controller.

* ``gpu_dra_claim_allocations_total{class,deviceType,node}`` — a **gauge**, not a counter despite
  its name: devices of our driver allocated right now, whoever allocated them (the scheduler or us),
  by the device class of the request, the device's ``deviceType`` attribute and its node.
  Computed at scrape time from the informer caches by :class:`AllocationCollector`, so a
  released or deleted claim never leaves a stale series behind.
* ``gpu_dra_allocation_latency_seconds`` — how long one successful allocation by this controller
  took: the allocator's decision plus the two writes.
* ``gpu_dra_allocation_failures_total{reason}`` — attempts that did not allocate: ``unschedulable``
  (no capacity now; retried), ``pool-not-ready``, ``search-limit``, ``invalid`` (the claim or a
  class is broken; not retried until it changes) and ``conflict`` (someone wrote first; retried).
* ``gpu_dra_allocation_collisions_total`` — allocations we gave back because another claim holds
  the same device, shares or counters (``internal/collisions.py``).
* ``gpu_dra_pod_check_seconds`` — one check of the Pods that reference a claim, made right before
  writing an allocation (``internal/service/pod_references.py``): the wait for the Pod cache to
  sync past the claim, or that wait plus a consistent read when the cache was not in time.
* ``gpu_dra_pod_barrier_total{outcome}`` — where such checks (and the checks after a write) got
  their answer: ``cache`` or ``fallback`` (the consistent LIST; a rising rate means a lagging Pod
  watch, and each costs a read of the namespace's Pods).
* ``gpu_dra_pod_reference_races_total{when}`` — how often that read found a Pod the Pod cache did
  not show yet: ``before-write`` (the allocation was not written) or ``after-write`` (a Pod created
  while the allocation was being written; the allocation was given back). Non-zero values are the
  informer lag the read exists for, not errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pkg.domain.metrics import METRICS, NAMESPACE
from pkg.dracontroller.accounting.devices import DeviceFacts, request_classes

FAILURE_REASONS = ("unschedulable", "pool-not-ready", "search-limit", "invalid", "conflict")

# A decision takes milliseconds; the two writes to a busy API server can take a second or more.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

allocation_latency = METRICS.histogram(
    "dra_allocation_latency_seconds",
    "Duration of one allocation by gpu-dra-controller: decision and status write.",
    buckets=_LATENCY_BUCKETS,
)
allocation_failures = METRICS.counter(
    "dra_allocation_failures",
    "Allocation attempts that did not allocate, by reason.",
    labelnames=["reason"],
)
allocation_collisions = METRICS.counter(
    "dra_allocation_collisions",
    "Allocations given back because another claim holds the same device or counters.",
)
pod_check_latency = METRICS.histogram(
    "dra_pod_check_seconds",
    "Duration of one consistent read of the Pods that reference a claim.",
    buckets=_LATENCY_BUCKETS,
)
pod_reference_races = METRICS.counter(
    "dra_pod_reference_races",
    "Pods referencing a claim that the consistent read found and the Pod cache did not show yet.",
    labelnames=["when"],
)
pod_barrier = METRICS.counter(
    "dra_pod_barrier",
    "Pod reference checks by where the answer came from: the Pod cache once synced past the claim "
    "(cache) or a consistent LIST because it was not in time (fallback).",
    labelnames=["outcome"],
)
RACE_MOMENTS = ("before-write", "after-write")
BARRIER_OUTCOMES = ("cache", "fallback")
for _outcome in BARRIER_OUTCOMES:
    pod_barrier.labels(outcome=_outcome)
for _reason in FAILURE_REASONS:
    allocation_failures.labels(reason=_reason)
for _when in RACE_MOMENTS:
    pod_reference_races.labels(when=_when)


class AllocationCollector(Collector):
    """``gpu_dra_claim_allocations_total`` from the claim and slice caches, at scrape time."""

    def __init__(
        self,
        *,
        claims: Callable[[], Iterable[Any]],
        devices: Callable[[], Mapping[tuple[str, str], DeviceFacts]],
        driver: str,
    ) -> None:
        self._claims = claims
        self._devices = devices  # the accountant's index: built once per change of the slices
        self._driver = driver

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{NAMESPACE}_dra_claim_allocations_total",
            "Devices of the driver allocated now, by device class, device type and node.",
            labels=["class", "deviceType", "node"],
        )
        devices = self._devices()
        counts: dict[tuple[str, str, str], int] = {}
        for claim in self._claims():
            allocation = claim.status.allocation if claim.status is not None else None
            if allocation is None or allocation.devices is None:
                continue
            classes = request_classes(claim)
            for result in allocation.devices.results or ():
                if result.driver != self._driver:
                    continue
                facts = devices.get((result.pool, result.device)) or DeviceFacts()
                key = (classes.get(result.request, ""), facts.device_type, facts.node)
                counts[key] = counts.get(key, 0) + 1
        for labels, count in sorted(counts.items()):
            family.add_metric(list(labels), float(count))
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


__all__ = [
    "BARRIER_OUTCOMES",
    "FAILURE_REASONS",
    "RACE_MOMENTS",
    "AllocationCollector",
    "allocation_collisions",
    "allocation_failures",
    "allocation_latency",
    "pod_barrier",
    "pod_check_latency",
    "pod_reference_races",
]
