#!/usr/bin/env python3
"""``make demo``: the GPU flow end to end on a local control plane with simulated GPU nodes.

    .venv/bin/python hack/demo.py [--keep-running]

1. starts etcd, kube-apiserver, kube-scheduler and kube-controller-manager (pkg/devcluster) and
   applies our CRDs;
2. registers two Nodes (no kubelet: Ready is set through the API) and runs, per node, the real
   gpu-node-agent on a fixture sysfs tree and the real gpu-handler with the simulated NVIDIA backend
   (NVML answered from real GPU data): node-a has 2xA30, node-b 1xH100 + 1xL4;
3. marks every card DriverReady=True, standing in for the GPU validator (not integrated yet);
4. applies the sample DeviceClasses (config/samples) and a Pod asking for a 1g MIG partition through
   an extended resource; the real kube-scheduler creates its ResourceClaim and allocates it;
5. prints the GPUs per node, the offers, and the Pod's allocated device and node; then stops
   everything and removes its temporary folder (or waits for Ctrl-C with --keep-running).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.devcluster.cluster import ControlPlane, ControlPlaneConfig, default_bin_dir
from pkg.devcluster.nodes import create_ready_node
from pkg.devcluster.processes import ManagedProcess, free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.client.config import new_api_client

ROOT = Path(__file__).resolve().parents[1]

NODES = {"gpu-node-a": "a30-x2", "gpu-node-b": "h100-and-l4"}
FIXTURES = ROOT / "test" / "fixtures"
NAMESPACE = "demo"
T = TypeVar("T")


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 90.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def start_node_components(plane: ControlPlane, work: Path, node: str, fixture: str) -> list[ManagedProcess]:
    host = work / "hosts" / node
    shutil.copytree(FIXTURES / "sysfs" / fixture, host, symlinks=True)
    common = [f"--kubeconfig={plane.kubeconfig}", f"--node-name={node}", f"--sysfs-root={host}"]
    python = sys.executable
    agent = ManagedProcess(
        name=f"gpu-node-agent[{node}]",
        log_path=work / "logs" / f"gpu-node-agent-{node}.log",
        argv=[
            python,
            "-m",
            "pkg.app.gpu_node_agent",
            *common,
            f"--host-root={host}",
            f"--pci-ids={FIXTURES / 'pci.ids'}",
            "--udev=false",
            "--resync-period=30",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
        ],
    )
    handler = ManagedProcess(
        name=f"gpu-handler[{node}]",
        log_path=work / "logs" / f"gpu-handler-{node}.log",
        argv=[
            python,
            "-m",
            "pkg.app.gpu_handler",
            *common,
            "--backend=simulated-nvidia",
            "--kubelet-plugin=false",
            f"--sim-state-dir={work / 'sim-state' / node}",
            "--enrich-period=30",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
        ],
    )
    for proc in (agent, handler):
        proc.start()
    return [agent, handler]


def mark_driver_ready(kube: KubeClient, gpu: PhysicalGPU) -> None:
    """What the GPU validator will do: report the driver ready (its own field manager, own entry)."""
    condition = {
        "type": "DriverReady",
        "status": "True",
        "reason": "DemoValidator",
        "message": "set by hack/demo.py: validator integration comes later",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    body = {
        "apiVersion": PHYSICAL_GPU.api_version,
        "kind": PHYSICAL_GPU.kind,
        "metadata": {"name": gpu.metadata.name},
        "status": {"conditions": [condition]},
    }
    kube.patch(
        PHYSICAL_GPU,
        str(gpu.metadata.name),
        body,
        patch_type=PatchType.APPLY,
        subresource="status",
        force=True,
    )


def all_gpus(kube: KubeClient, *, expected: int) -> list[PhysicalGPU] | None:
    gpus, _ = kube.list(PHYSICAL_GPU)
    return gpus if len(gpus) == expected else None


def bound_node(kube: KubeClient, pod: str) -> str | None:
    spec = kube.get(POD, pod, NAMESPACE).spec
    return spec.node_name if spec is not None else None


def allocation_lines(kube: KubeClient, node: str) -> list[str]:
    claims, _ = kube.list(RESOURCE_CLAIM, namespace=NAMESPACE)
    lines = []
    for claim in claims:
        allocation = claim.status.allocation if claim.status else None
        devices = allocation.devices if allocation else None
        for result in (devices.results or []) if devices else []:
            lines.append(
                f"  Pod {NAMESPACE}/mig-1g-demo -> node {node}, "
                f"claim {claim.metadata.name if claim.metadata else '?'}: "
                f"device {result.device} (pool {result.pool})"
            )
    return lines


def show_offers(kube: KubeClient) -> None:
    slices, _ = kube.list(RESOURCE_SLICE)
    for node in NODES:
        kinds: Counter[str] = Counter()
        for rs in slices:
            if rs.spec.node_name != node:
                continue
            for device in rs.spec.devices or []:
                attrs = device.attributes or {}
                kind = attrs.get("gpu.deckhouse.io/deviceType")
                strategy = attrs.get("gpu.deckhouse.io/sharingStrategy")
                profile = attrs.get("gpu.deckhouse.io/migProfile")
                label = (profile.string if profile and profile.string else None) or (
                    strategy.string if strategy and strategy.string else (kind.string if kind else "?")
                )
                kinds[f"{kind.string if kind else '?'}:{label}"] += 1
        print(
            f"  {node}: {sum(kinds.values())} offers in {sum(1 for s in slices if s.spec.node_name == node)} "
            f"slices (pool gpus/{node})"
        )
        for key, count in sorted(kinds.items()):
            print(f"    {count:3d} x {key}")


def run(keep_running: bool) -> int:
    work = Path(tempfile.mkdtemp(prefix="gpu-demo-"))
    plane = ControlPlane(ControlPlaneConfig(bin_dir=default_bin_dir(), work_dir=work / "cluster"))
    node_processes: list[ManagedProcess] = []
    try:
        step("starting etcd, kube-apiserver, kube-scheduler, kube-controller-manager (Kubernetes 1.37.1)")
        plane.start()
        plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        kube = KubeClient(new_api_client(str(plane.kubeconfig)), field_manager="demo")
        print(f"  kubeconfig: {plane.kubeconfig}")

        step("registering simulated GPU nodes and starting gpu-node-agent + gpu-handler on each")
        for node, fixture in NODES.items():
            create_ready_node(kube, node)
            node_processes += start_node_components(plane, work, node, fixture)
            print(f"  {node}: fixture host {fixture} (simulated NVML backend)")

        step("waiting for the node agents' PhysicalGPUs")
        gpus: list[PhysicalGPU] = wait_for(lambda: all_gpus(kube, expected=4), what="4 PhysicalGPUs")
        step("marking DriverReady=True on every card (stand-in for the GPU validator, integrated later)")
        for gpu in gpus:
            mark_driver_ready(kube, gpu)
        wait_for(
            lambda: all((g.status and g.status.capabilities) for g in kube.list(PHYSICAL_GPU)[0]),
            what="gpu-handler to enrich every card",
        )
        wait_for(
            lambda: len({s.spec.node_name for s in kube.list(RESOURCE_SLICE)[0]}) == len(NODES),
            what="ResourceSlices of both nodes",
        )
        print(plane.kubectl("get", "physicalgpus", "-o", "wide"))

        step("offers published as ResourceSlices (driver gpu.deckhouse.io)")
        show_offers(kube)

        step("creating sample DeviceClasses and a Pod asking for gpu.deckhouse.io/mig-1g: 1")
        plane.kubectl("apply", "-f", str(ROOT / "config" / "samples" / "deviceclasses.yaml"))
        plane.kubectl("create", "namespace", NAMESPACE)
        wait_for(
            lambda: "default" in plane.kubectl("get", "sa", "-n", NAMESPACE, "-o", "name"),
            what="the demo namespace's service account",
        )
        plane.kubectl("apply", "-n", NAMESPACE, "-f", str(ROOT / "config" / "samples" / "pod-mig-1g.yaml"))
        node_name = wait_for(lambda: bound_node(kube, "mig-1g-demo"), what="the scheduler to bind the Pod")
        step("result")
        for line in allocation_lines(kube, node_name):
            print(line)
        for gpu in gpus:
            print(f"  card {gpu.metadata.name} on {(gpu.metadata.labels or {}).get(LABEL_NODE)}")
        print("  (no kubelet runs here, so the Pod is bound and allocated but never started)")
        if keep_running:
            step(f"running; KUBECONFIG={plane.kubeconfig} kubectl get pgpu,resourceslices  — Ctrl-C stops")
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            stop.wait()
        return 0
    except Exception as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        for proc in [*node_processes, *plane.processes.values()]:
            print(f"--- last lines of {proc.name}:\n{proc.tail(15)}", file=sys.stderr)
        return 1
    finally:
        step("stopping everything")
        for proc in reversed(node_processes):
            proc.stop()
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
        print("  done; nothing left behind")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep-running", action="store_true", help="keep the cluster up until Ctrl-C")
    return run(parser.parse_args().keep_running)


if __name__ == "__main__":
    sys.exit(main())
