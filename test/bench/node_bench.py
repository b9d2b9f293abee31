"""Table 4: the node components' footprint on the demo's nodes, and their API writes when idle.

``make demo``'s cluster (``hack/demo.py``): two real nodes (kubelet + containerd each) over
simulated GPU hosts (gpu-node-a: 2 x A30, gpu-node-b: H100 + L4), gpu-controller with its
validator flow, and on each node gpu-node-agent and gpu-handler as host processes. Root, and the
machine's real-node lock (``exclusive_host``): it waits for another engineer's e2e run or demo.

* **start to ready**: from the process's start to its ``/readyz`` answering 200 (caches synced,
  controllers running: what the DaemonSet's readiness probe asks), and to its first work done —
  the node's PhysicalGPUs exist (node agent), the kubelet registered the plugin (gpu-handler);
* **RSS**: resident memory once idle, and the peak (VmHWM), per process (the same on both nodes
  but for their cards);
* **writes per minute when idle**: after the offers are published and a settling pause, the API
  server's **audit log** (write verbs only, one event per request) over a window, by the client's
  user agent — every component sends its name as its user agent. Nothing is counted by our code.
"""

from __future__ import annotations

import calendar
import contextlib
import importlib.util
import io
import json
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from kubernetes.client import V1Namespace, V1ObjectMeta

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY
from api.gpu.v1alpha1.physicalgpu import LABEL_NODE
from bench.bench_cluster import wait_for
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import (
    CONTROLLERS,
    NODE_CONTROLLERS,
    ControlPlane,
    ControlPlaneConfig,
    default_bin_dir,
)
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.gpustack import GpuStack
from pkg.devcluster.hostlock import exclusive_host
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import ManagedProcess
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NAMESPACE, RESOURCE_SLICE

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata", "verbs": list(WRITE_VERBS)}, {"level": "None"}],
}
COMPONENTS = ("gpu-node-agent", "gpu-handler")


def _load_demo() -> ModuleType:
    """``hack/demo.py``, whose cluster this benchmark measures; loaded by path, as ``hack/`` holds
    scripts rather than a package."""
    path = Path(__file__).resolve().parents[2] / "hack" / "demo.py"
    spec = importlib.util.spec_from_file_location("demo", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


demo = _load_demo()


@dataclass
class Started:
    process: ManagedProcess
    node: str
    at: float
    ready_at: float | None = None
    working_at: float | None = None


def _metrics_address(process: ManagedProcess) -> str:
    [flag] = [a for a in process.argv if a.startswith("--metrics-bind-address=")]
    return flag.split("=", 1)[1]


def _ready(process: ManagedProcess) -> bool:
    try:
        url = f"http://{_metrics_address(process)}/readyz"
        return bool(urllib.request.urlopen(url, timeout=1).status == 200)
    except OSError:
        return False


def _memory_mib(process: ManagedProcess) -> tuple[float, float]:
    assert process.process is not None
    text = Path(f"/proc/{process.process.pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def audit_writes(log: Path, since: float, until: float) -> Counter[str]:
    """Write requests per user agent (its first word: the component) between two wall-clock times."""
    counts: Counter[str] = Counter()
    for line in log.read_text().splitlines():
        event = json.loads(line)
        stamp = calendar.timegm(time.strptime(event["requestReceivedTimestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
        if event.get("verb") in WRITE_VERBS and since <= stamp < until:
            counts[str(event.get("userAgent", "?")).split("/")[0].split(" ")[0]] += 1
    return counts


def _start_components(
    kube: KubeClient,
    stack: GpuStack,
    nodes: list[RealNode],
    components: list[GpuComponents],
) -> list[Started]:
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=demo.COMPONENTS_NAMESPACE)))
    stack.create_config(kube, nodes[0].base.parent)
    stack.start_controller()
    started = []
    for node in nodes:
        at = time.monotonic()
        gpu = stack.start_node(node)
        components.append(gpu)
        started += [Started(gpu.agent, node.name, at), Started(gpu.handler, node.name, at)]
    deadline = time.monotonic() + 300
    while any(s.ready_at is None or s.working_at is None for s in started):
        if time.monotonic() > deadline:
            late = [s for s in started if s.ready_at is None or s.working_at is None]
            raise TimeoutError(
                "not ready or not working after 300s: "
                + "; ".join(
                    f"{s.process.name} (ready: {s.ready_at is not None}):\n{s.process.tail(20)}" for s in late
                )
            )
        for s, gpu in zip(started, [g for g in components for _ in (0, 1)], strict=True):
            if not s.process.running():
                raise RuntimeError(f"{s.process.name} exited before it was ready:\n{s.process.tail(20)}")
            now = time.monotonic()
            if s.ready_at is None and _ready(s.process):
                s.ready_at = now
            if s.working_at is None and (
                (
                    s.process is gpu.agent
                    and kube.list(PHYSICAL_GPU, label_selector=f"{LABEL_NODE}={s.node}")[0]
                )
                or (
                    s.process is gpu.handler
                    and "registered with the kubelet" in s.process.log_path.read_text()
                )
            ):
                s.working_at = now
        time.sleep(0.1)
    return started


def measure(quick: bool) -> None:
    settle, window = (5.0, 20.0) if quick else (15.0, 60.0)
    # A short folder name: the kubelet plugin's socket paths under it must fit a unix socket's 108 bytes.
    with tempfile.TemporaryDirectory(prefix="gpu-fp-") as tmp:
        work = Path(tmp)
        policy, audit = work / "audit-policy.json", work / "audit.log"
        policy.write_text(json.dumps(AUDIT_POLICY))
        plane = ControlPlane(
            ControlPlaneConfig(
                bin_dir=default_bin_dir(),
                work_dir=work / "cluster",
                controllers=CONTROLLERS + NODE_CONTROLLERS,
                extra_args={
                    "kube-apiserver": (
                        f"--audit-policy-file={policy}",
                        f"--audit-log-path={audit}",
                        "--audit-log-format=json",
                        "--audit-log-mode=blocking",
                    )
                },
            )
        )
        stack = GpuStack(
            plane=plane,
            work=work,
            namespace=demo.COMPONENTS_NAMESPACE,
            config=demo.OPERATOR_CONFIG,
            config_key=OPERATOR_CONFIG_KEY,
            pci_ids=demo.FIXTURES / "pci.ids",
            driver_version=DRIVER_VERSION,
        )
        nodes: list[RealNode] = []
        components: list[GpuComponents] = []
        kube: KubeClient | None = None
        chatter = io.StringIO()  # the demo's step-by-step output, shown only if something fails
        try:
            with contextlib.redirect_stdout(chatter):
                kube = demo.start_cluster(plane)
                demo.start_nodes(plane, work, nodes)
            started = _start_components(kube, stack, nodes, components)
            wait_for(
                lambda: len({s.spec.node_name for s in kube.list(RESOURCE_SLICE)[0]}) == len(nodes),
                what="both nodes' offers",
                timeout=180,
                every=0.5,
            )
            time.sleep(settle)
            since = time.time()
            time.sleep(window)
            until = time.time()
            time.sleep(2)  # the audit log's last events of the window are written
            writes = audit_writes(audit, since, until)
            memory = {id(s): _memory_mib(s.process) for s in started}
            for s in started:
                if not s.process.running():
                    raise RuntimeError(f"{s.process.name} exited:\n{s.process.tail()}")
        except BaseException:
            print(chatter.getvalue(), file=sys.stderr)
            raise
        finally:
            with contextlib.redirect_stdout(io.StringIO()):
                demo.stop_all(plane, kube, stack, nodes, work)
    print(f"  {'':>28} {'to ready s':>10} {'to work s':>10} {'RSS MiB':>8} {'peak MiB':>8}")
    for s in started:
        rss, peak = memory[id(s)]
        assert s.ready_at is not None
        assert s.working_at is not None
        ready, working = s.ready_at - s.at, s.working_at - s.at
        print(f"  {s.process.name:>28} {ready:>10.1f} {working:>10.1f} {rss:>8.0f} {peak:>8.0f}")
    minutes = (until - since) / 60
    print(
        f"  API writes per minute when idle ({until - since:.0f}s window after a {settle:.0f}s pause; "
        "audit log, by user agent):"
    )
    for agent in (*COMPONENTS, "gpu-controller"):
        print(
            f"  {agent:>28} {writes.get(agent, 0) / minutes:>10.1f}  (2 nodes)"
            if agent in COMPONENTS
            else f"  {agent:>28} {writes.get(agent, 0) / minutes:>10.1f}"
        )
    others = ", ".join(
        f"{a} {n / minutes:.0f}" for a, n in writes.most_common() if a not in (*COMPONENTS, "gpu-controller")
    )
    print(f"  {'others (for scale)':>28} {others or 'none'}")


def main(*, quick: bool = False) -> None:
    print("4. node footprint: the demo's two real nodes (gpu-node-a 2 x A30, gpu-node-b H100 + L4)")
    with exclusive_host(on_wait=lambda message: print(f"  {message}", flush=True)):
        measure(quick)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
