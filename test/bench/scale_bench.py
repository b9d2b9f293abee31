"""The control-plane components at cluster size: resident memory and ``explain``'s answer time.

* **gpu-dra-controller RSS** with ``--dra-nodes`` nodes of 8 H100 cached (every offer the
  gpu-handler publishes: 28 devices per card, 224,000 at 1,000 nodes), after it allocated a few
  claims (so the allocator's pools are built, as in a working controller) and settled its heap.
  Target: at most 1 GiB at 1,000 nodes.
* **explain** of a claim at that size, as a user runs it: ``gpu-dra-controller explain NS/CLAIM``
  against the API server, from process start to exit (reading the cluster included), and the
  process's peak RSS. Target: under 2 s at 1,000 nodes. ``--only explain`` measures only this:
  first computed locally (``--local``; with ``--tree`` also from that checkout, on the same
  control plane) while no controller runs (the 20 claims unallocated), then **served by
  gpu-dra-controller** (a ClaimExplanation, docs/allocator.md#explain-served-by-the-controller):
  the controller is started, and once its caches synced and it allocated the claims,
  ``kubectl gpu explain CLAIM`` is timed from process start to exit (a first, cold request builds
  nothing the allocations had not; three more are timed), with the controller's RSS after.
* **gpu-controller RSS** with ``--gpu-nodes`` Nodes of 8 PhysicalGPUs each (40,000 at 5,000 nodes),
  objects created as the node agent writes them (the object, then its status), without kubelets:
  once its caches have synced, and after a minute of work (it sets both pending conditions on every
  card and the gate labels on every node). Target: at most 300 MB at 5,000 nodes.

``PYTHONPATH=test .venv/bin/python -m bench.scale_bench [--dra-nodes 1000] [--gpu-nodes 5000]
[--only dra,gpu,explain] [--tree DIR]`` (``--tree``: the controllers from another checkout, e.g.
``git archive`` of an earlier commit's ``pkg api``, for a before/after on one machine).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client import ResourceV1ResourceClaim, V1Namespace, V1Node, V1ObjectMeta

from api.gpu.v1alpha1 import (
    LABEL_NODE,
    NodeInfo,
    OSInfo,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from bench.bench_cluster import BenchPlane, bench_plane, fetch, interpreter, parallel, total, wait_for
from bench.scheduler_bench import load_cluster, workload
from pkg.devcluster.processes import ManagedProcess, free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client.builtin_kinds import NAMESPACE, NODE, RESOURCE_CLAIM

MIB = 1024 * 1024


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def ready(port: int) -> bool | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
            return answer.status == 200 or None
    except OSError:
        return None


def allocated(url: str) -> float:
    """Claims allocated so far (0 while the metrics page does not answer: a busy start-up)."""
    try:
        return total(fetch(url, timeout=60), "gpu_dra_allocation_latency_seconds_count")
    except OSError:
        return 0.0


TREE: Path | None = None  # --tree: run the controllers from this checkout (a before/after)


def controller(
    module: str, bp: BenchPlane, port: int, namespace: str, log: Path, *, tree: Path | None = None
) -> ManagedProcess:
    python = interpreter(tree)
    entry = f"import sys; from {module} import main; sys.exit(main())"
    return ManagedProcess(
        name=module.rsplit(".", 1)[-1],
        argv=[*python.argv, "-c", entry, f"--kubeconfig={bp.plane.kubeconfig}",
              f"--metrics-bind-address=127.0.0.1:{port}", f"--leader-election-namespace={namespace}"],
        log_path=log,
        env=python.env,
    )  # fmt: skip


def load_scale(bp: BenchPlane, nodes: int, what: str, *, note: str = "") -> list[ResourceV1ResourceClaim]:
    """The cluster of ``nodes`` nodes x 8 H100 and 20 claims of the mix in namespace ``scale``."""
    began = time.monotonic()
    load_cluster(bp, nodes)
    print(f"{what}: {nodes} nodes x 8 H100 ({nodes * 224} devices; loaded in "
          f"{time.monotonic() - began:.0f}s{note})", flush=True)  # fmt: skip
    bp.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name="scale")))
    claims = workload(20, "scale")
    parallel(claims, lambda c: bp.kube.create(RESOURCE_CLAIM, c))
    return claims


@dataclass(frozen=True)
class RunningController:
    """A gpu-dra-controller of the bench, synced, with the load's claims allocated."""

    pid: int
    synced: float  # seconds from start to ready
    log: Path


@contextlib.contextmanager
def running_controller(
    bp: BenchPlane, claims: list[ResourceV1ResourceClaim], log: Path, tree: Path | None
) -> Iterator[RunningController]:
    port = free_port()
    process = controller("pkg.app.gpu_dra_controller", bp, port, "scale", log, tree=tree)
    started = time.monotonic()
    process.start()
    try:
        wait_for(lambda: ready(port), what="gpu-dra-controller ready", timeout=900, every=0.5)
        synced = time.monotonic() - started
        url = f"http://127.0.0.1:{port}/metrics"
        wait_for(
            lambda: allocated(url) >= len(claims) or None, what="the claims allocated", timeout=900, every=1
        )
        assert process.process is not None
        yield RunningController(pid=process.process.pid, synced=synced, log=log)
    finally:
        process.stop()


def dra(bp: BenchPlane, nodes: int, work: Path) -> None:
    """gpu-dra-controller's memory with the cluster cached, ``kubectl gpu explain`` served by it,
    then explain computed locally."""
    claims = load_scale(bp, nodes, "gpu-dra-controller")
    claim = explained_claim(bp, claims)
    with running_controller(bp, claims, work / "gpu-dra-controller.log", TREE) as ctl:
        time.sleep(5)  # the heap settler runs every second
        rss, peak = memory(ctl.pid)
        print(f"  RSS {rss:6.0f} MiB  peak {peak:6.0f} MiB  (caches synced {ctl.synced:.0f}s after start; "
              f"{len(claims)} claims allocated; target <= 1024 MiB)", flush=True)  # fmt: skip
        if TREE is None:  # an older tree may serve no explanations
            explain_served(bp, claim, ctl)
    measure_explain(bp, claim, trees=[None])


def explained_claim(bp: BenchPlane, claims: list[ResourceV1ResourceClaim]) -> str:
    """Creates the claim explain is asked about (one more of the mix) and returns its name."""
    name = claims[0].metadata.name if claims[0].metadata else ""
    claim = workload(1, "scale", seed=99)[0]
    assert claim.metadata is not None
    claim.metadata.name = f"explained-{name}"
    bp.kube.create(RESOURCE_CLAIM, claim)
    return claim.metadata.name


def explain_once(bp: BenchPlane, claim: str, tree: Path | None) -> tuple[float, float]:
    """``gpu-dra-controller explain scale/CLAIM`` from ``tree`` (None: this checkout, ``--local``:
    computed here, never asking a controller): seconds from start to exit and the process's peak
    RSS in MiB (its own rusage, from ``wait4``)."""
    python = interpreter(tree)
    entry = "import sys; from pkg.app.gpu_dra_controller import main; sys.exit(main())"
    local = [] if tree is not None else ["--local"]  # an older tree knows no --local: it is local
    argv = [
        *python.argv,
        "-c",
        entry,
        "explain",
        f"scale/{claim}",
        f"--kubeconfig={bp.plane.kubeconfig}",
        *local,
    ]
    took, peak, _ = timed(argv, exit_codes=(0, 1), env=python.env)
    return took, peak


CPU_SECONDS: list[float] = []  # user + system seconds of each timed run, in order


def timed(
    argv: list[str], *, exit_codes: tuple[int, ...], env: dict[str, str] | None = None
) -> tuple[float, float, str]:
    """Runs ``argv``: seconds from start to exit, its peak RSS in MiB, its stderr (its CPU seconds
    are appended to :data:`CPU_SECONDS`: on a loaded shared machine the wall time of a short
    process is mostly waiting for a CPU, and its CPU time says what it costs)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.monotonic()
        process = subprocess.Popen(argv, stdout=out, stderr=err, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(process.pid, 0)
        took = time.monotonic() - began
        CPU_SECONDS.append(usage.ru_utime + usage.ru_stime)
        process.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        errors = err.read().decode(errors="replace")
        if code not in exit_codes:
            raise RuntimeError(f"{argv[3:5]} failed ({code}): {errors[-2000:]}")
    return took, usage.ru_maxrss / 1024, errors


def measure_explain(bp: BenchPlane, claim: str, *, trees: list[Path | None]) -> None:
    for tree in trees:
        took, peak = explain_once(bp, claim, tree)
        where = f"from {tree}" if tree else "this tree"
        print(f"  explain {where}: {took:.2f} s (start to exit, reading the cluster; target < 2 s), "
              f"peak RSS {peak:.0f} MiB", flush=True)  # fmt: skip


def explain_only(bp: BenchPlane, nodes: int, work: Path) -> None:
    """explain at ``nodes`` nodes: computed locally with no controller (the claims unallocated),
    then served by gpu-dra-controller."""
    claims = load_scale(bp, nodes, "explain", note="; claims unallocated")
    claim = explained_claim(bp, claims)
    measure_explain(bp, claim, trees=[TREE, None] if TREE is not None else [None])
    with running_controller(bp, claims, work / "gpu-dra-controller-explain.log", None) as ctl:
        explain_served(bp, claim, ctl)


KUBECTL_GPU = Path(sys.executable).parent / "kubectl-gpu"


def explain_served(bp: BenchPlane, claim: str, ctl: RunningController, runs: int = 3) -> None:
    """``kubectl gpu explain`` answered by the running gpu-dra-controller: start to exit, the
    plugin's CPU, the controller's own time (its log) and its RSS before and after answering."""
    # The first request of a class is timed after the leader's selector warmer made its passes
    # (pkg/dracontroller/warmup.py), as any request later than a few seconds after a leader started.
    warmed = wait_for(
        lambda: next((line for line in ctl.log.read_text(errors="replace").splitlines()
                      if "selector passes" in line), None),
        what="the controller's selector passes", timeout=300, every=0.2,
    )  # fmt: skip
    print("    controller: " + warmed[warmed.index("made ") :].rstrip().rstrip('"}'), flush=True)
    before, _ = memory(ctl.pid)
    argv = [str(KUBECTL_GPU), "explain", claim, "-n", "scale", f"--kubeconfig={bp.plane.kubeconfig}",
            "--timeout", "60"]  # fmt: skip
    times = []
    del CPU_SECONDS[:]
    for _ in range(runs + 1):
        took, peak, errors = timed(argv, exit_codes=(0, 5))
        if "warning:" in errors:
            raise RuntimeError(f"kubectl gpu explain was not served by the controller: {errors}")
        times.append(took)
    rss, hwm = memory(ctl.pid)
    log = ctl.log.read_text(errors="replace").splitlines()
    for line in [line for line in log if "explained scale/" in line][: runs + 1]:
        message = line[line.index("explained scale/") :].rstrip().rstrip('"}')
        print(f"    controller: {message}", flush=True)
    print(f"  kubectl gpu explain served by gpu-dra-controller: first {times[0]:.2f} s, then "
          f"{', '.join(f'{t:.2f}' for t in times[1:])} s (start to exit; target < 2 s; the plugin's CPU "
          f"{', '.join(f'{t:.2f}' for t in CPU_SECONDS)} s), plugin peak RSS "
          f"{peak:.0f} MiB; controller synced {ctl.synced:.0f}s after start, RSS {before:.0f} MiB before, "
          f"{rss:.0f} MiB after (peak {hwm:.0f} MiB)", flush=True)  # fmt: skip


def physical_gpu(node: str, card: int) -> PhysicalGPU:
    return PhysicalGPU(metadata=V1ObjectMeta(name=f"{node}-{card}-10de-2330", labels={LABEL_NODE: node}))


def gpu_status(node: str, card: int) -> PhysicalGPUStatus:
    return PhysicalGPUStatus(
        node_info=NodeInfo(node_name=node, os=OSInfo(id="debian", version="12"),
                           kernel_release="6.1.0-28-amd64", bare_metal=True),
        pci_info=PciInfo(address=f"0000:{0x18 + card * 0x10:02x}:00.0", class_=PciClass(code="0302"),
                         vendor=PciId(id="10de"), device=PciId(id="2330")),
    )  # fmt: skip


def create_gpu(bp: BenchPlane, node: str, card: int) -> None:
    gpu = bp.kube.create(PHYSICAL_GPU, physical_gpu(node, card))
    gpu.status = gpu_status(node, card)
    bp.kube.update_status(PHYSICAL_GPU, gpu)


def gpu_controller(bp: BenchPlane, nodes: int, work: Path) -> None:
    began = time.monotonic()
    names = [f"gpu-node-{n:05d}" for n in range(nodes)]
    parallel(names, lambda name: bp.kube.create(NODE, V1Node(metadata=V1ObjectMeta(name=name))))
    parallel(
        ((name, card) for name in names for card in range(8)), lambda nc: create_gpu(bp, *nc), threads=12
    )
    print(f"gpu-controller: {nodes} nodes x 8 PhysicalGPUs ({nodes * 8} objects; created in "
          f"{time.monotonic() - began:.0f}s)", flush=True)  # fmt: skip
    trees = [TREE, None] if TREE is not None else [None]  # with --tree: before, then after, one plane
    for n, tree in enumerate(trees):
        namespace = f"gpu-scale-{n}"
        bp.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=namespace)))
        port = free_port()
        log = work / f"gpu-controller-{n}.log"
        process = controller("pkg.app.gpu_controller", bp, port, namespace, log, tree=tree)
        started = time.monotonic()
        process.start()
        try:
            wait_for(functools.partial(ready, port), what="gpu-controller ready", timeout=900, every=0.5)
            synced = time.monotonic() - started
            assert process.process is not None
            at_sync = memory(process.process.pid)
            time.sleep(60)
            rss, peak = memory(process.process.pid)
        finally:
            process.stop()
        print(f"  {'from ' + str(tree) if tree else 'this tree'}: RSS {at_sync[0]:6.0f} MiB once synced "
              f"({synced:.0f}s), {rss:6.0f} MiB after a minute of work, peak {peak:6.0f} MiB  "
              f"(target <= {300e6 / MIB:.0f} MiB)", flush=True)  # fmt: skip


def main(*, quick: bool = False, dra_nodes: int = 1000, gpu_nodes: int = 5000, only: str = "dra,gpu") -> None:
    if quick:
        dra_nodes, gpu_nodes = 20, 100
    chosen = set(only.split(","))
    with tempfile.TemporaryDirectory(prefix="gpu-bench-size-") as work:
        if "dra" in chosen:
            with bench_plane() as bp:
                dra(bp, dra_nodes, Path(work))
        if "explain" in chosen:
            with bench_plane() as bp:
                explain_only(bp, dra_nodes, Path(work))
        if "gpu" in chosen:
            with bench_plane() as bp:
                gpu_controller(bp, gpu_nodes, Path(work))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dra-nodes", type=int, default=1000)
    parser.add_argument("--gpu-nodes", type=int, default=5000)
    parser.add_argument("--only", default="dra,gpu")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tree", type=Path, default=None, help="run the controllers from this checkout")
    args = parser.parse_args()
    TREE = args.tree
    main(quick=args.quick, dra_nodes=args.dra_nodes, gpu_nodes=args.gpu_nodes, only=args.only)
