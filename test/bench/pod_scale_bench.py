"""gpu-dra-controller with N live Pods in the claims' namespace: rate, latency, memory, bytes.

Usage: ``PYTHONPATH=test .venv/bin/python -m bench.pod_scale_bench [--nodes 100] [--claims 200]
[--pods 0,1000] [--pod-kib 8] [--tree DIR]``. One control plane (with our CRDs) and ``--nodes``
fake nodes of 8 H100 are loaded once; then, per Pod count, a fresh namespace gets that many Pods
(which reference no claim and which no scheduler picks up, so the Pod watch stays quiet, the hard
case for a read barrier) and ``--claims`` claims of the scheduler bench's mix, and the controller
is started and allocates them. ``--tree`` runs the controller from another checkout (e.g. an
export of 267c47d, before the read barrier) to compare before and after on the same machine.

Printed per run: allocations per second (slope of ``gpu_dra_allocation_latency_seconds_count``),
p50/p99 of that histogram, the controller's resident memory once done, and the bytes the API
server answered to LISTs of Pods during the run per allocation (``apiserver_response_sizes``;
this includes the controller's one initial list of all Pods).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from kubernetes.client import V1Container, V1EnvVar, V1Namespace, V1ObjectMeta, V1Pod, V1PodSpec

from bench.bench_cluster import (
    BenchPlane,
    bench_plane,
    fetch,
    histogram_quantile,
    interpreter,
    parallel,
    total,
    wait_for,
)
from bench.scheduler_bench import _slope, load_cluster, workload
from pkg.devcluster.processes import ManagedProcess, free_port
from pkg.framework.client.builtin_kinds import NAMESPACE, POD, RESOURCE_CLAIM

LATENCY = "gpu_dra_allocation_latency_seconds"


def bulky_pod(name: str, namespace: str, kib: int) -> V1Pod:
    """A Pod of roughly ``kib`` KiB of JSON that references no claim and no scheduler will bind."""
    env = [V1EnvVar(name=f"VAR_{i:03d}", value="v" * 40) for i in range(20)]
    containers = [V1Container(name=f"c{i}", image="registry.k8s.io/pause:3.10", env=env) for i in range(3)]
    return V1Pod(
        metadata=V1ObjectMeta(
            name=name, namespace=namespace, labels={"app": "filler"},
            annotations={"filler": "x" * max(0, kib * 1024 - 6 * 1024)},
        ),
        spec=V1PodSpec(containers=containers, scheduler_name="no-such-scheduler"),
    )  # fmt: skip


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pod_list_bytes(bp: BenchPlane) -> float:
    text = bp.plane.kubectl("get", "--raw", "/metrics")
    return total(text, "apiserver_response_sizes_sum", {"resource": "pods", "verb": "LIST"})


def run(bp: BenchPlane, *, pods: int, claims: int, kib: int, tree: Path | None, work: Path) -> str:
    namespace = f"scale-{pods}"
    bp.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=namespace)))
    parallel(
        (f"filler-{i:05d}" for i in range(pods)), lambda n: bp.kube.create(POD, bulky_pod(n, namespace, kib))
    )
    parallel(workload(claims, namespace), lambda c: bp.kube.create(RESOURCE_CLAIM, c))
    bytes_before = pod_list_bytes(bp)
    port = free_port()
    python = interpreter(tree)
    entry = "import sys; from pkg.app.gpu_dra_controller import main; sys.exit(main())"
    controller = ManagedProcess(
        name="gpu-dra-controller",
        argv=[*python.argv, "-c", entry, f"--kubeconfig={bp.plane.kubeconfig}",
              f"--metrics-bind-address=127.0.0.1:{port}", f"--leader-election-namespace={namespace}"],
        log_path=work / f"gpu-dra-controller-{pods}.log",
        env=python.env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    controller.start()
    try:
        rate = _slope(lambda: total(fetch(url), f"{LATENCY}_count"), claims, what="allocations", timeout=1800)
        text = fetch(url)
        rss = rss_kib(controller.process.pid) if controller.process else 0
    finally:
        controller.stop()
    read = pod_list_bytes(bp) - bytes_before
    bp.kube.delete(NAMESPACE, namespace)
    wait_for(lambda: namespace not in bp.plane.kubectl("get", "ns", "-o", "name") or None,
             what="the namespace to go", timeout=600)  # fmt: skip
    p50, p99 = (histogram_quantile(text, LATENCY, q) * 1000 for q in (0.5, 0.99))
    return (
        f"  {pods:>6} Pods  {rate:>8.2f}/s  p50 {p50:>7.1f} ms  p99 {p99:>7.1f} ms  "
        f"RSS {rss / 1024:>6.0f} MiB  Pod LIST bytes/allocation {read / claims / 1024:>8.1f} KiB"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--claims", type=int, default=200)
    p.add_argument("--pods", default="0,1000")
    p.add_argument("--pod-kib", type=int, default=8)
    p.add_argument("--tree", type=Path, default=None, help="run the controller from this checkout")
    args = p.parse_args()
    with bench_plane() as bp, tempfile.TemporaryDirectory(prefix="gpu-bench-scale-") as work:
        load_cluster(bp, args.nodes)
        print(f"{args.nodes} nodes x 8 H100, {args.claims} claims, Pods of ~{args.pod_kib} KiB; "
              f"controller from {args.tree or 'this tree'}", flush=True)  # fmt: skip
        for pods in (int(n) for n in args.pods.split(",")):
            print(run(bp, pods=pods, claims=args.claims, kib=args.pod_kib, tree=args.tree, work=Path(work)),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
