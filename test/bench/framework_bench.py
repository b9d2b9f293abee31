"""Table 3: the same trivial controller in pkg/framework and in kopf, against one local API server.

The controller (``controllers/``): watch BenchItems, and when ``spec.value`` differs from what it
observed, patch ``status.<controller>`` with the value and the wall-clock time its reconcile (its
kopf handler) began. Each controller has its own status field, so one set of objects serves both,
one controller at a time:

* **reconciles/s at N objects**: N BenchItems exist before the controller starts; the rate is
  N over the span from the first reconcile's start to the last one's (times the controllers wrote),
  so start-up and the initial list are out of it;
* **event -> reconcile p50/p99 at 50 and 200 events/s**: the driver patches ``spec.value`` and
  ``spec.sentAt`` of distinct objects at a steady rate (the rate it reached is printed: it shares
  the CPUs); the latency of each is ``reconciledAt - sentAt`` (one clock: both run on this
  machine). 50/s is a load both keep up with here; at 200/s the API server takes 200 driver
  patches and up to 200 status patches a second on 2 CPUs;
* **RSS**: the controller process's resident memory after both, and its peak (VmHWM).

Then, in-process (no API server), **one user change behind a burst** (:func:`burst_rows`): N
objects from the informer's initial list (a start or a lease takeover) are queued, the controller
starts one worker whose reconcile stands for an API round trip (1 ms), and one object is then
created. The row is how long that creation waits, and how many backlog requests were reconciled
before it, with the FIFO queue (``use_priority_queue(False)``) and with the priority queue.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.client import V1Namespace, V1ObjectMeta

from bench.bench_cluster import BenchPlane, bench_plane, parallel, percentile, wait_for
from bench.controllers.bench_item import BENCH_ITEM, NAMESPACE, BenchItem
from pkg.devcluster.processes import ManagedProcess
from pkg.framework.cache.listener import ResourceListener
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.builtin_kinds import NAMESPACE as NAMESPACE_KIND
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestForObject
from pkg.framework.metrics.provider import MetricsProvider
from pkg.framework.reconcile.contract import Request, Result

HERE = Path(__file__).resolve().parent
RATES = (50.0, 200.0)  # events per second: one both keep up with on 2 CPUs, and four times that


@dataclass(frozen=True)
class Latency:
    sent_per_second: float  # the rate the driver reached
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Row:
    controller: str
    reconciles_per_second: float
    latency: dict[float, Latency]  # by the rate asked for
    rss_mib: float
    peak_mib: float


def controller_process(name: str, kubeconfig: Path, log_dir: Path) -> ManagedProcess:
    python = sys.executable
    argv = {
        "framework": [python, str(HERE / "controllers" / "framework_controller.py"), str(kubeconfig)],
        "kopf": [
            python,
            "-m",
            "kopf",
            "run",
            "--standalone",
            "--quiet",
            "-n",
            NAMESPACE,
            str(HERE / "controllers" / "kopf_controller.py"),
        ],
    }[name]
    env = {
        "KUBECONFIG": str(kubeconfig),
        # the controllers import bench.controllers.bench_item: test/ on the path, and the checkout
        "PYTHONPATH": f"{HERE.parent}:{HERE.parents[1]}",
        "LOG_LEVEL": "Warning",
    }
    return ManagedProcess(name=name, argv=argv, log_path=log_dir / f"{name}.log", env=env)


def statuses(kube: KubeClient, controller: str) -> list[tuple[BenchItem, dict[str, float]]]:
    items, _ = kube.list(BENCH_ITEM, namespace=NAMESPACE)
    return [(i, i.status.get(controller) or {}) for i in items]


def all_observed(kube: KubeClient, controller: str) -> list[tuple[BenchItem, dict[str, float]]] | None:
    found = statuses(kube, controller)
    return found if all(s.get("observedValue") == i.spec.get("value") for i, s in found) else None


def memory_mib(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def drive(kube: KubeClient, names: list[str], value: int, rate: float, seconds: float) -> float:
    """Patches ``spec`` of distinct objects at ``rate`` per second; returns the rate achieved (the
    driver shares the machine's CPUs with the API server and the controller)."""
    count = min(len(names), int(rate * seconds))
    started = time.monotonic()

    def send(index: int) -> None:
        delay = started + index / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = {"spec": {"value": value, "sentAt": time.time()}}
        path = BENCH_ITEM.object_path(names[index], NAMESPACE)
        kube.raw("PATCH", path, body=body, content_type=PatchType.MERGE)  # raw: no decoding to spend CPU on

    with ThreadPoolExecutor(32) as pool:  # a patch takes longer than 1/rate: several in flight
        list(pool.map(send, range(count)))
    return count / (time.monotonic() - started)


def measure(bp: BenchPlane, controller: str, names: list[str], value: int, seconds: float, logs: Path) -> Row:
    process = controller_process(controller, bp.plane.kubeconfig, logs)
    process.start()
    try:
        done = wait_for(
            lambda: all_observed(bp.kube, controller),
            what=f"{controller} to reconcile {len(names)} objects",
            timeout=900,
            every=2.0,
        )
        began = [s["reconciledAt"] for _, s in done]
        rate = (len(began) - 1) / (max(began) - min(began))
        latency = {}
        for step, rate in enumerate(RATES, start=1):
            sent = drive(bp.kube, names, value * 10 + step, rate, seconds)
            done = wait_for(
                lambda: all_observed(bp.kube, controller),
                what=f"{controller} to catch up with the events",
                timeout=300,
                every=1.0,
            )
            ms = [
                (s["reconciledAt"] - i.spec["sentAt"]) * 1000
                for i, s in done
                if i.spec["value"] == value * 10 + step
            ]
            latency[rate] = Latency(sent, percentile(ms, 0.5), percentile(ms, 0.99))
        assert process.process is not None
        rss, peak = memory_mib(process.process.pid)
        if not process.running():
            raise RuntimeError(f"{controller} exited:\n{process.tail()}")
    finally:
        process.stop()
    return Row(controller, rate, latency, rss, peak)


BURST_RECONCILE_SECONDS = 0.001  # what one reconcile costs: about one API round trip
USER_CHANGE = "user-change"


@dataclass(frozen=True)
class BurstRow:
    queue: str
    backlog: int
    waited_ms: float  # from the creation event to its reconcile's start
    reconciled_before: int  # backlog requests reconciled between the creation and its reconcile


class _ListedInformer:
    """Stands in for an informer: hands its listeners adds, says it has synced."""

    kind = BENCH_ITEM

    def __init__(self) -> None:
        self._listeners: list[ResourceListener[Any]] = []

    def add_listener(self, listener: ResourceListener[Any]) -> None:
        self._listeners.append(listener)

    def wait_for_sync(self, timeout: float) -> bool:
        return True

    def added(self, name: str, *, initial: bool) -> None:
        item = BenchItem(metadata=V1ObjectMeta(name=name, namespace=NAMESPACE, resource_version="1"))
        for listener in self._listeners:
            listener.on_add(item, is_in_initial_list=initial)


class _BurstReconciler:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.user_reconciled = threading.Event()
        self.count = 0
        self.count_at_user = 0
        self.user_at = 0.0

    def reconcile(self, request: Request) -> Result:
        if request.name == USER_CHANGE:
            self.user_at = time.perf_counter()
            self.count_at_user = self.count
            self.user_reconciled.set()
        self.count += 1
        self.started.set()
        time.sleep(BURST_RECONCILE_SECONDS)
        return Result()


def burst(*, backlog: int, use_priority_queue: bool) -> BurstRow:
    informer = _ListedInformer()
    reconciler = _BurstReconciler()
    queue = "priority" if use_priority_queue else "FIFO"
    controller = Controller(
        name=f"burst-{queue}",
        reconciler=reconciler,
        use_priority_queue=use_priority_queue,
        metrics=MetricsProvider(namespace="bench"),
    )
    controller.watch(informer, EnqueueRequestForObject())
    for i in range(backlog):
        informer.added(f"listed-{i:05d}", initial=True)
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    runner.start()
    try:
        if not reconciler.started.wait(60):
            raise RuntimeError("the burst controller never reconciled")
        sent_at, before = time.perf_counter(), reconciler.count
        informer.added(USER_CHANGE, initial=False)
        if not reconciler.user_reconciled.wait(60 + backlog * BURST_RECONCILE_SECONDS * 10):
            raise RuntimeError("the user change was never reconciled")
    finally:
        stop.set()
        runner.join(10)
    waited = (reconciler.user_at - sent_at) * 1000
    return BurstRow(queue, backlog, waited, reconciler.count_at_user - before)


def burst_rows(*, quick: bool = False) -> list[BurstRow]:
    backlog = 500 if quick else 5000
    return [burst(backlog=backlog, use_priority_queue=pq) for pq in (False, True)]


def print_burst(rows: list[BurstRow]) -> None:
    print(
        f"  one object created behind {rows[0].backlog} initial-list requests "
        f"({BURST_RECONCILE_SECONDS * 1000:.0f} ms reconciles, 1 worker, in-process)"
    )
    print(f"  {'queue':>10} {'waited ms':>10} {'backlog reconciled first':>25}")
    for row in rows:
        print(f"  {row.queue:>10} {row.waited_ms:>10.0f} {row.reconciled_before:>25}")


def main(*, quick: bool = False) -> None:
    objects, seconds = (500, 2.0) if quick else (5000, 10.0)
    print(f"3. framework vs kopf: the same trivial controller (watch a CRD, patch status), {objects} objects")
    with bench_plane() as bp, tempfile.TemporaryDirectory(prefix="gpu-bench-fw-") as logs:
        bp.plane.kubectl("apply", "-f", str(HERE / "controllers" / "benchitem-crd.yaml"))
        bp.plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd/benchitems.bench.gpu.deckhouse.io"
        )
        bp.kube.create(NAMESPACE_KIND, V1Namespace(metadata=V1ObjectMeta(name=NAMESPACE)))
        names = [f"item-{i:05d}" for i in range(objects)]

        def create(name: str) -> object:
            item = BenchItem(metadata=V1ObjectMeta(name=name), spec={"value": 0})
            return bp.kube.create(BENCH_ITEM, item, namespace=NAMESPACE)

        parallel(names, create)
        rows = [
            measure(bp, c, names, v, seconds, Path(logs))
            for v, c in enumerate(("framework", "kopf"), start=1)
        ]
    heads = " ".join(f"{f'p50/p99 ms at {r:.0f}/s':>22}" for r in RATES)
    print(f"  {'':>10} {'reconciles/s':>12} {heads} {'RSS MiB':>8} {'peak MiB':>8}  (events sent per s)")
    for row in rows:
        cells = " ".join(f"{f'{x.p50_ms:.0f} / {x.p99_ms:.0f}':>22}" for x in row.latency.values())
        sent = ", ".join(f"{x.sent_per_second:.0f}" for x in row.latency.values())
        print(
            f"  {row.controller:>10} {row.reconciles_per_second:>12.0f} {cells} "
            f"{row.rss_mib:>8.0f} {row.peak_mib:>8.0f}  ({sent})"
        )
    print_burst(burst_rows(quick=quick))


if __name__ == "__main__":
    if "--burst-only" in sys.argv:  # the in-process rows alone: no API server needed
        print_burst(burst_rows(quick="--quick" in sys.argv))
    else:
        main(quick="--quick" in sys.argv)
