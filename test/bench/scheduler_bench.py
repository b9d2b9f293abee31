"""Table 1: allocation by the real kube-scheduler beside gpu-dra-controller, on one workload.

One control plane per size: N Nodes without a kubelet (Ready, untainted: what the scheduler
needs of a node, ``pkg.devcluster.nodes``), each with 8 H100 80GB published as the gpu-handler
publishes them (every offer: 28 devices per card), the DeviceClasses of ``allocator_bench``, and a
seeded mix of claims — Physical, MIG 1g and 3g, TimeSlicing shares of 10/25/50%.

* **kube-scheduler**: the claims and one Pod per claim are created while the scheduler is stopped,
  then it starts and schedules the backlog. Pods/s is the slope of its own
  ``scheduler_schedule_attempts_total{result="scheduled"}`` from the first scheduled Pod to the
  last; the per-Pod latency is ``scheduler_scheduling_attempt_duration_seconds`` (scheduling
  algorithm + binding) for scheduled attempts, as quantiles of its histogram.
* **gpu-dra-controller** (the process): the same claims, without Pods (pre-provisioned, as it
  allocates them), created while it is stopped, then it starts. Decisions/s is the slope of its
  ``gpu_dra_allocation_latency_seconds_count``; latency is that histogram (decision + both
  writes), comparable with the scheduler's attempt duration.
* **allocator alone**: the same claims through ``pkg.dra.allocator`` in this process (best fit, the
  controller's decision without the API round trips).

Both run against the same slices; the scheduler's run comes first, so the controller's claims land
on a cluster where the scheduler's are allocated (a few percent of the cards).
"""

from __future__ import annotations

import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1CapacityRequirements,
    V1Container,
    V1DeviceClaim,
    V1DeviceRequest,
    V1ExactDeviceRequest,
    V1Namespace,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
    V1ResourceRequirements,
)

from bench.allocator_bench import cluster_slices, device_classes, h100_cards
from bench.bench_cluster import BenchPlane, bench_plane, fetch, histogram_quantile, parallel, total, wait_for
from pkg.devcluster.nodes import create_ready_node
from pkg.devcluster.processes import ManagedProcess, free_port
from pkg.dra.allocator import Allocator, Unschedulable
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

MIX = (("mig-1g", 40), ("mig-3g", 20), ("physical", 20), ("ts", 20))
SCHEDULER_CI = "40-70"  # kube-scheduler's own CI (scheduler_perf), Pods/s at 500 nodes


def claim_for(name: str, namespace: str, cls: str, share: str | None = None) -> ResourceV1ResourceClaim:
    capacity = V1CapacityRequirements(requests={"sharePercent": share}) if share else None
    request = V1DeviceRequest(
        name="gpu", exactly=V1ExactDeviceRequest(device_class_name=cls, capacity=capacity)
    )
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1ResourceClaimSpec(devices=V1DeviceClaim(requests=[request])),
    )


def workload(count: int, namespace: str, seed: int = 7) -> list[ResourceV1ResourceClaim]:
    rng = random.Random(seed)
    names = [name for name, _ in MIX]
    weights = [weight for _, weight in MIX]
    claims = []
    for i in range(count):
        cls = rng.choices(names, weights)[0]
        share = str(rng.choice((10, 25, 50))) if cls == "ts" else None
        claims.append(claim_for(f"c{i:05d}", namespace, cls, share))
    return claims


def pod_for(claim: ResourceV1ResourceClaim) -> V1Pod:
    assert claim.metadata is not None
    name = str(claim.metadata.name)
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace=claim.metadata.namespace),
        spec=V1PodSpec(
            resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name=name)],
            containers=[
                V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=V1ResourceRequirements(claims=[{"name": "gpu"}]),
                )
            ],
        ),
    )


@dataclass(frozen=True)
class Row:
    who: str
    per_second: float
    p50_ms: float
    p99_ms: float
    note: str = ""


def _slope(read: Callable[[], float], target: int, *, what: str, timeout: float) -> float:
    """Items per second from the first one counted to the ``target``-th, sampling ``read`` often."""
    first: tuple[float, float] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done = read()
        except OSError:
            done = 0.0  # the process is still opening its port
        now = time.monotonic()
        if done > 0 and first is None:
            first = (now, done)
        if done >= target and first is not None:
            elapsed = now - first[0]
            return (done - first[1]) / elapsed if elapsed > 0 else math.inf
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def load_cluster(bp: BenchPlane, nodes: int) -> None:
    kube = bp.kube
    parallel((f"node-{n:04d}" for n in range(nodes)), lambda name: create_ready_node(kube, name))
    slices = cluster_slices(nodes, h100_cards())
    for rs in slices:
        assert rs.metadata is not None
        rs.metadata.resource_version = None  # set for the in-process allocator's pool cache
    parallel(slices, lambda rs: kube.create(RESOURCE_SLICE, rs), threads=4)
    for cls in device_classes().values():
        assert cls.metadata is not None
        cls.metadata.resource_version = None
        kube.create(DEVICE_CLASS, cls)


def run_scheduler(bp: BenchPlane, count: int) -> Row:
    scheduler = bp.plane.processes["kube-scheduler"]
    scheduler.stop()
    bp.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name="sched")))
    wait_for(
        lambda: "default" in bp.plane.kubectl("get", "sa", "-n", "sched", "-o", "name"),
        what="the namespace's service account",
        timeout=60,
    )
    claims = workload(count, "sched")
    parallel(claims, lambda c: bp.kube.create(RESOURCE_CLAIM, c))
    parallel(claims, lambda c: bp.kube.create(POD, pod_for(c)))
    scheduler.start()
    scheduled = {"result": "scheduled"}
    rate = _slope(
        lambda: total(fetch(bp.scheduler_metrics), "scheduler_schedule_attempts_total", scheduled),
        count,
        what=f"kube-scheduler to schedule {count} Pods",
        timeout=900,
    )
    text = fetch(bp.scheduler_metrics)
    name = "scheduler_scheduling_attempt_duration_seconds"
    unschedulable = total(text, "scheduler_schedule_attempts_total", {"result": "unschedulable"})
    return Row(
        "kube-scheduler",
        rate,
        histogram_quantile(text, name, 0.5, scheduled) * 1000,
        histogram_quantile(text, name, 0.99, scheduled) * 1000,
        f"{unschedulable:.0f} unschedulable attempts" if unschedulable else "",
    )


def run_controller(bp: BenchPlane, count: int, work: Path) -> Row:
    bp.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name="ctrl")))
    parallel(workload(count, "ctrl"), lambda c: bp.kube.create(RESOURCE_CLAIM, c))
    port = free_port()
    controller = ManagedProcess(
        name="gpu-dra-controller",
        argv=[
            sys.executable,
            "-m",
            "pkg.app.gpu_dra_controller",
            f"--kubeconfig={bp.plane.kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{port}",
            "--leader-election-namespace=ctrl",
        ],
        log_path=work / "gpu-dra-controller.log",
    )
    url = f"http://127.0.0.1:{port}/metrics"
    name = "gpu_dra_allocation_latency_seconds"
    controller.start()
    try:
        rate = _slope(
            lambda: total(fetch(url), f"{name}_count"),
            count,
            what=f"gpu-dra-controller to allocate {count} claims",
            timeout=900,
        )
        text = fetch(url)
    finally:
        controller.stop()
    failures = total(text, "gpu_dra_allocation_failures_total")
    return Row(
        "gpu-dra-controller",
        rate,
        histogram_quantile(text, name, 0.5) * 1000,
        histogram_quantile(text, name, 0.99) * 1000,
        f"{failures:.0f} failed attempts" if failures else "",
    )


def run_allocator(nodes: int, count: int) -> Row:
    slices = cluster_slices(nodes, h100_cards())
    classes = device_classes()
    allocator = Allocator()
    allocated: list[ResourceV1ResourceClaim] = []
    latencies = []
    for c in workload(count, "alone"):
        assert c.metadata is not None
        c.metadata.uid = f"uid-{c.metadata.name}"
        started = time.perf_counter()
        outcome = allocator.allocate(c, slices=slices, classes=classes, allocated_claims=allocated)
        allocator.settle_heap()
        latencies.append(time.perf_counter() - started)
        if not isinstance(outcome, Unschedulable):
            c.status = V1ResourceClaimStatus(allocation=outcome)
            allocated.append(c)
    ordered = sorted(latencies)
    return Row(
        "allocator alone",
        count / sum(latencies),
        statistics.median(ordered) * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "in-process, no API writes",
    )


def _ms(value: float) -> str:
    """A latency cell; past the histogram's largest bucket only a lower bound is known."""
    return f"{value:>8.1f}" if math.isfinite(value) else f"{'> top':>8}"


def measure(nodes: int, count: int) -> list[Row]:
    with bench_plane() as bp, tempfile.TemporaryDirectory(prefix="gpu-bench-dra-") as work:
        started = time.monotonic()
        load_cluster(bp, nodes)
        loaded = time.monotonic() - started
        rows = [run_scheduler(bp, count), run_controller(bp, count, Path(work))]
    rows.append(run_allocator(nodes, count))
    print(
        f"  {nodes} nodes x 8 H100 ({nodes * 8 * 28} devices; loaded in {loaded:.0f}s), {count} claims "
        f"({', '.join(f'{k} {w}%' for k, w in MIX)})"
    )
    for r in rows:
        print(f"  {r.who:>20} {r.per_second:>10.1f} {_ms(r.p50_ms)} {_ms(r.p99_ms)}  {r.note}")
    return rows


def main(*, quick: bool = False) -> None:
    print("1. allocation: the real kube-scheduler (Pods with claims) vs gpu-dra-controller (the same claims)")
    print(f"  {'':>20} {'per second':>10} {'p50 ms':>8} {'p99 ms':>8}")
    sizes = ((20, 60),) if quick else ((100, 200), (1000, 100))
    for nodes, count in sizes:
        measure(nodes, count)
    reference = "scheduler_perf, 500 nodes (reference)"
    print(f"  {'kube-scheduler CI':>20} {SCHEDULER_CI:>10} {'':>8} {'':>8}  {reference}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
