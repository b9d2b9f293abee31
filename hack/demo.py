#!/usr/bin/env python3
"""``make demo``: the GPU flow end to end on a local cluster with real nodes and simulated GPUs.

    .venv/bin/python hack/demo.py [--keep-running]

1. starts etcd, kube-apiserver, kube-scheduler and kube-controller-manager (pkg/devcluster) and
   applies our CRDs;
2. starts three real nodes on this machine — a kubelet and its own containerd each — over simulated
   GPU hosts (sysfs tree, device nodes, simulated NVML with real GPU data): gpu-node-a has 2 x A30,
   gpu-node-b an H100 and an L4, gpu-node-c is a bare-metal VM host with 2 x T4 under NVIDIA's
   vGPU manager (its cards are offered as vGPUs and whole for passthrough, to VMs only); runs the
   real gpu-node-agent and gpu-handler on each;
3. runs gpu-controller with its configuration ConfigMap, and gpu-dra-controller (which answers
   ``kubectl gpu explain``), as the chart installs them: gpu-controller labels the nodes with GPUs
   and renders the node components' DaemonSets (stand-in images, pkg/devcluster/gpustack.py); each
   node's validator Pod checks the node's NVIDIA device nodes, and once it is Ready gpu-controller
   marks the node's cards DriverReady and gpu-handler publishes their offers;
4. applies the sample DeviceClasses and GPUClasses (config/samples) and a Pod asking for
   ``gpu.deckhouse.io/mig-1g: 1``: the real
   kube-scheduler allocates a 1g MIG offer, the real kubelet calls gpu-handler, which creates the
   MIG device at the offer's placement and writes its CDI spec, and containerd starts the container
   with it; the container's log shows what it got;
5. deletes the Pod: the kubelet calls Unprepare, the MIG device and the CDI spec are gone;
6. stops everything and removes its temporary folder (or, with --keep-running, prints how to try
   the samples of config/samples, the README's quick start, and waits).

It prints its PID; SIGINT or SIGTERM, to it or to the ``make`` running it, stops it and cleans up.
"""

from __future__ import annotations

import argparse
import json
import os
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

from kubernetes.client import (
    V1Container,
    V1Namespace,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1ResourceRequirements,
)

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import (
    CONTROLLERS,
    NODE_CONTROLLERS,
    ControlPlane,
    ControlPlaneConfig,
    default_bin_dir,
)
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.gpustack import GpuStack
from pkg.devcluster.hostlock import exclusive_host
from pkg.devcluster.images import BUSYBOX_IMAGE, build_archive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.parentstop import STOP_SIGNALS, watch_parent
from pkg.devcluster.samples import (
    DEMO_NODES,
    RUNNABLE,
    SAMPLES_DIR,
    SCHEDULED_FIRST,
    UNSATISFIABLE,
    WAIT_SCHEDULED_FIRST,
)
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import CONFIG_MAP, NAMESPACE, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.client.config import new_api_client

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "test" / "fixtures"
NODES = DEMO_NODES
DEMO_NAMESPACE = "demo"
COMPONENTS_NAMESPACE = "gpu-system"
OPERATOR_CONFIG = "gpu-operator-config"
POD_NAME = "mig-1g-demo"
SHOW = (
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
    "echo device nodes:; "
    "ls -l /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm* /dev/nvidia-caps/* 2>/dev/null | sed 's/^/  /'; "
    "echo driver files from the base CDI spec:; ls /usr/local/nvidia/lib64 | sed 's/^/  /'; "
    "nvidia-smi | sed 's/^/  /'; "
    "echo done; "
    "exec sleep 3600"
)
T = TypeVar("T")


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = 90.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.3)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def demo_pod() -> V1Pod:
    """The one-line UX: an extended resource of the gpu-mig-1g class (the sample Pod's request,
    with the local busybox image instead of a CUDA image, since nothing can be pulled here)."""
    return V1Pod(
        metadata=V1ObjectMeta(name=POD_NAME),
        spec=V1PodSpec(
            restart_policy="Never",
            termination_grace_period_seconds=1,
            containers=[
                V1Container(
                    name="cuda",
                    image=BUSYBOX_IMAGE,
                    image_pull_policy="Never",
                    command=["sh", "-c", SHOW],
                    resources=V1ResourceRequirements(limits={"gpu.deckhouse.io/mig-1g": "1"}),
                )
            ],
        ),
    )


def show_offers(kube: KubeClient) -> None:
    slices, _ = kube.list(RESOURCE_SLICE)
    for node in NODES:
        kinds: Counter[str] = Counter()
        for rs in (s for s in slices if s.spec.node_name == node):
            for device in rs.spec.devices or []:
                attrs = device.attributes or {}
                kind = attrs["gpu.deckhouse.io/deviceType"].string
                profile = attrs.get("gpu.deckhouse.io/migProfile") or attrs.get("gpu.deckhouse.io/vgpuType")
                strategy = attrs.get("gpu.deckhouse.io/sharingStrategy")
                label = profile.string if profile else (strategy.string if strategy else kind)
                kinds[f"{kind}:{label}"] += 1
        print(f"  {node}: {sum(kinds.values())} offers in pool gpus/{node}")
        for key, count in sorted(kinds.items()):
            print(f"    {count:3d} x {key}")


def mig_instances(node: RealNode) -> list[str]:
    path = node.host.nvml_state / "driver" / "driver.json"
    cards = json.loads(path.read_text())["cards"] if path.exists() else {}
    return [
        f"{address}: GPU instance {gi['id']} (profile {gi['profile_id']}, slice {gi['start']}), "
        f"{len(gi['compute_instances'])} compute instance(s)"
        for address, card in cards.items()
        for gi in card["gpu_instances"]
    ]


def pod_gone(kube: KubeClient) -> bool:
    try:
        kube.get(POD, POD_NAME, DEMO_NAMESPACE)
    except NotFoundError:
        return True
    return False


def start_cluster(plane: ControlPlane) -> KubeClient:
    step("starting etcd, kube-apiserver, kube-scheduler, kube-controller-manager (Kubernetes 1.37.1)")
    plane.start()
    plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    print(f"  kubeconfig: {plane.kubeconfig}")
    return KubeClient(new_api_client(str(plane.kubeconfig)), field_manager="demo")


def start_nodes(plane: ControlPlane, work: Path, nodes: list[RealNode]) -> None:
    step(f"starting {len(NODES)} real nodes (kubelet + containerd each) over simulated GPU hosts")
    images = build_archive(work / "images.tar")
    for index, (name, fixture) in enumerate(NODES.items()):
        node = RealNode(
            config=NodeConfig(name=name, gpu_fixture=FIXTURES / "sysfs" / fixture),
            plane=plane,
            index=index,
            images=images,
            work_dir=work / "nodes",
        )
        nodes.append(node)
        node.start()
        print(f"  {name}: Ready (fixture host {fixture}; kubelet on :{node.kubelet.port})")
    print(plane.kubectl("get", "nodes", "-o", "wide"))


def start_components(
    plane: ControlPlane,
    kube: KubeClient,
    stack: GpuStack,
    nodes: list[RealNode],
    components: list[GpuComponents],
) -> None:
    step("gpu-controller and gpu-dra-controller, and gpu-node-agent and gpu-handler on each node")
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=COMPONENTS_NAMESPACE)))
    stack.create_config(kube, nodes[0].base.parent)
    stack.start_controller()
    stack.start_dra_controller()
    for node in nodes:
        components.append(stack.start_node(node))
    step("each node's validator Pod runs; once it is Ready its cards are DriverReady and offered")
    for node, gpu in zip(nodes, components, strict=True):
        wait_for_offers(plane, node.name, cards=2, mark_ready=False, timeout=180)
        gpu.wait_registered()
    print(plane.kubectl("get", "pods", "-n", COMPONENTS_NAMESPACE, "-o", "wide"))
    print(
        plane.kubectl(
            "get",
            "physicalgpus",
            "-o",
            "custom-columns=NAME:.metadata.name,NODE:.metadata.labels.gpu\\.deckhouse\\.io/node,"
            'DRIVER-READY:.status.conditions[?(@.type=="DriverReady")].status,'
            'REASON:.status.conditions[?(@.type=="DriverReady")].reason',
        )
    )


def apply_classes(plane: ControlPlane) -> None:
    """The sample DeviceClasses, and the GPUClasses gpu-controller turns into DeviceClasses."""
    step("the sample DeviceClasses and GPUClasses (config/samples)")
    plane.kubectl("apply", "-f", str(SAMPLES_DIR / "deviceclasses.yaml"))
    plane.kubectl("apply", "-f", str(SAMPLES_DIR / "gpuclasses.yaml"))
    wait_for(
        lambda: plane.kubectl("get", "deviceclass", "big-gpu", "-o", "name", check=False).strip(),
        what="gpu-controller to make the GPUClasses' DeviceClasses",
    )
    print(plane.kubectl("get", "gpuclasses"))


def run_gpu_pod(plane: ControlPlane, kube: KubeClient, nodes: list[RealNode]) -> RealNode:
    step("a Pod asking for gpu.deckhouse.io/mig-1g: 1")
    plane.kubectl("create", "namespace", DEMO_NAMESPACE)
    wait_for(
        lambda: "default" in plane.kubectl("get", "sa", "-n", DEMO_NAMESPACE, "-o", "name"),
        what="the namespace",
    )
    kube.create(POD, demo_pod(), namespace=DEMO_NAMESPACE)

    def logged() -> str | None:
        out = plane.kubectl("logs", "-n", DEMO_NAMESPACE, POD_NAME, check=False)
        return out if "done" in out else None

    log = wait_for(logged, what="the Pod to run")
    pod = kube.get(POD, POD_NAME, DEMO_NAMESPACE)
    claims, _ = kube.list(RESOURCE_CLAIM, namespace=DEMO_NAMESPACE)
    for claim in claims:
        allocation = claim.status.allocation if claim.status else None
        results = allocation.devices.results if allocation and allocation.devices else None
        for result in results or []:
            name = claim.metadata.name if claim.metadata else "?"
            print(f"  claim {name}: device {result.device} (pool {result.pool})")
    node_name = pod.spec.node_name if pod.spec else None
    phase = pod.status.phase if pod.status else None
    print(f"  Pod {DEMO_NAMESPACE}/{POD_NAME} is {phase} on {node_name}; its log:")
    print("    " + "\n    ".join(log.rstrip().splitlines()))
    node = next(n for n in nodes if n.name == node_name)
    print("  on the node: " + "; ".join(mig_instances(node)))
    print(f"  CDI specs: {cdi_specs(node)}")
    return node


def delete_gpu_pod(kube: KubeClient, node: RealNode) -> None:
    step("deleting the Pod: the kubelet calls NodeUnprepareResources")
    kube.delete(POD, POD_NAME, DEMO_NAMESPACE)
    wait_for(lambda: pod_gone(kube), what="the Pod to go")
    wait_for(lambda: not mig_instances(node), what="the MIG device to be destroyed")
    print(f"  MIG devices left: {mig_instances(node) or 'none'}; CDI specs left: {cdi_specs(node) or 'none'}")


def cdi_specs(node: RealNode) -> list[str]:
    return sorted(p.name for p in node.cdi_dir.glob("k8s.gpu.deckhouse.io-*"))


def wait_for_ctrl_c(plane: ControlPlane) -> None:
    """Keeps the cluster up for the README's walkthrough until a stop signal ends the wait."""
    step(f"running (PID {os.getpid()}); in another shell, the README's quick start:")
    print(f"  export KUBECONFIG={plane.kubeconfig}")
    print(f"  export PATH={plane.config.bin_dir}:{ROOT / '.venv' / 'bin'}:$PATH   # kubectl, kubectl gpu")
    # The MIG sample first, and placed before the rest (pkg.devcluster.samples says why).
    print(f"  kubectl apply -f {SCHEDULED_FIRST.path.relative_to(ROOT)}")
    print(
        f"  kubectl {' '.join(WAIT_SCHEDULED_FIRST)}   # MIG needs an A30 or the H100: let it take one first"
    )
    for sample in (*RUNNABLE, UNSATISFIABLE):
        if sample != SCHEDULED_FIRST:
            print(f"  kubectl apply -f {sample.path.relative_to(ROOT)}")
    print(f"  kubectl get pods; kubectl gpu who; kubectl gpu explain pod/{UNSATISFIABLE.pod}")
    print(f"  Ctrl-C, or kill -INT {os.getpid()} (or the make running it), stops and cleans up")
    threading.Event().wait()  # until a stop signal raises KeyboardInterrupt (see main)


def delete_user_pods(plane: ControlPlane, kube: KubeClient) -> None:
    def user_pods() -> list[V1Pod]:
        pods, _ = kube.list(POD)
        return [p for p in pods if p.metadata and p.metadata.namespace != COMPONENTS_NAMESPACE]

    namespaces = sorted({str(p.metadata.namespace) for p in user_pods() if p.metadata})
    for namespace in namespaces:
        plane.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=false", check=False)
    try:
        wait_for(lambda: not user_pods() or None, what="the Pods of " + ", ".join(namespaces), timeout=90)
    except TimeoutError as exc:
        print(f"  {exc}")


def stop_all(
    plane: ControlPlane, kube: KubeClient | None, stack: GpuStack, nodes: list[RealNode], work: Path
) -> None:
    step("stopping everything")
    for sig in STOP_SIGNALS:  # a second signal must not cut the clean-up short
        signal.signal(sig, lambda *_: print("  already stopping; cleaning up", flush=True))
    if kube is not None and stack.processes:
        # The user's Pods (the walkthrough's samples) first, while gpu-handler still runs to
        # unprepare their devices: a node stopping later would wait for each of them in vain.
        delete_user_pods(plane, kube)
        # Uninstall next: the ConfigMap's deletion takes the DaemonSets and their Pods with it.
        try:
            kube.delete(CONFIG_MAP, OPERATOR_CONFIG, COMPONENTS_NAMESPACE)
            wait_for(
                lambda: not kube.list(POD, namespace=COMPONENTS_NAMESPACE)[0] or None,
                what="the node components' Pods to go",
                timeout=120,
            )
        except (NotFoundError, TimeoutError) as exc:
            print(f"  uninstall: {exc}")
    stack.stop()
    leftovers = []
    for node in reversed(nodes):
        node.stop()
        leftovers += node.leftovers()
        node.remove_files()
    plane.stop()
    shutil.rmtree(work, ignore_errors=True)
    print("  done; nothing left behind" if not leftovers else f"  left behind: {leftovers}")


def run(keep_running: bool) -> int:
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="gpu-demo-"))
    plane = ControlPlane(
        ControlPlaneConfig(
            bin_dir=default_bin_dir(), work_dir=work / "cluster", controllers=CONTROLLERS + NODE_CONTROLLERS
        )
    )
    nodes: list[RealNode] = []
    components: list[GpuComponents] = []
    stack = GpuStack(
        plane=plane,
        work=work,
        namespace=COMPONENTS_NAMESPACE,
        config=OPERATOR_CONFIG,
        config_key=OPERATOR_CONFIG_KEY,
        pci_ids=FIXTURES / "pci.ids",
        driver_version=DRIVER_VERSION,
    )
    kube: KubeClient | None = None
    try:
        kube = start_cluster(plane)
        start_nodes(plane, work, nodes)
        start_components(plane, kube, stack, nodes, components)
        step("offers published as ResourceSlices (driver gpu.deckhouse.io)")
        wait_for(
            lambda: len({s.spec.node_name for s in kube.list(RESOURCE_SLICE)[0]}) == len(NODES),
            what="every node's pool",
        )
        show_offers(kube)
        apply_classes(plane)
        node = run_gpu_pod(plane, kube, nodes)
        delete_gpu_pod(kube, node)
        print(f"  (the flow took {time.monotonic() - started:.1f}s)")
        if keep_running:
            wait_for_ctrl_c(plane)
        return 0
    except KeyboardInterrupt:
        print("\nstop signal received", flush=True)
        return 0 if keep_running else 130
    except Exception as exc:
        print(f"\ndemo failed: {exc}", file=sys.stderr)
        processes = stack.processes + [p for n in nodes for p in n.processes]
        for proc in [*processes, *plane.processes.values()]:
            print(f"--- last lines of {proc.name}:\n{proc.tail(15)}", file=sys.stderr)
        return 1
    finally:
        stop_all(plane, kube, stack, nodes, work)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep-running", action="store_true", help="keep the cluster up until Ctrl-C")
    keep_running = parser.parse_args().keep_running
    print(f"demo PID {os.getpid()}: SIGINT or SIGTERM (Ctrl-C, kill -INT {os.getpid()}) stops it", flush=True)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.default_int_handler)  # KeyboardInterrupt: run()'s clean-up runs
    watch_parent(lambda: os.kill(os.getpid(), signal.SIGINT))  # a signal to `make demo`'s make
    try:
        with exclusive_host(on_wait=lambda message: print(message, flush=True)):
            return run(keep_running)
    except KeyboardInterrupt:  # while waiting for the real-node lock: nothing started yet
        print("stopped before starting anything", flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
