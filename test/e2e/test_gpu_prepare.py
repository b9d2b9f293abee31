"""The kubelet plugin on a real node: Pods asking for our devices run, and give them back.

The real scheduler allocates from our ResourceSlices through the sample classes' extended
resources; the real kubelet calls gpu-handler over its socket; containerd applies our CDI specs.
Each test checks what the container saw and what the node holds afterwards (simulated driver,
CDI folder, checkpoint).
"""

from __future__ import annotations

from kubernetes.client import V1Pod
from testutil.e2e.gpu_nodes import (
    cdi_specs,
    checkpoint,
    gpu_instances,
    gpu_pod,
    mig_mode,
    pod_gone,
    run_and_show,
)
from testutil.k8s_fields import name_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD

A30_FIRST = "0000:3b:00.0"


def _delete_and_wait(kube: KubeClient, namespace: str, pod: V1Pod) -> None:
    kube.delete(POD, name_of(pod), namespace)
    wait_until(lambda: pod_gone(kube, namespace, name_of(pod)), timeout=60, what="the Pod to go")


def test_a_mig_1g_pod_runs_on_its_mig_device_and_gives_it_back(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    pod = gpu_pod("mig-1g", "mig-1g", node=node.name)
    seen = run_and_show(kube, control_plane, namespace, pod)

    assert seen.visible.startswith("MIG-")
    record = next(iter(checkpoint(node).values()))
    [device] = record["devices"]
    assert device["mig"]["uuid"] == seen.visible
    minor = 0 if device["card"] == A30_FIRST else 1
    caps = [n for n in seen.nodes if n.startswith("/dev/nvidia-caps/")]
    assert f"/dev/nvidia{minor}" in seen.nodes
    assert "/dev/nvidiactl" in seen.nodes
    assert len(caps) == 2  # the GPU instance's and the compute instance's access
    assert f"/dev/nvidia{1 - minor}" not in seen.nodes  # only its own card
    assert gpu_instances(node) == {device["card"]: [(14, device["mig"]["placementStart"])]}
    assert len(cdi_specs(node)) == 1

    _delete_and_wait(kube, namespace, pod)
    wait_until(lambda: not checkpoint(node), timeout=60, what="the kubelet to unprepare the claim")

    assert gpu_instances(node) == {}
    assert cdi_specs(node) == []


def test_a_whole_card_pod_gets_the_card_and_a_card_left_in_mig_mode_leaves_it(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    mig = gpu_pod("mig-first", "mig-1g", node=node.name)
    run_and_show(kube, control_plane, namespace, mig)
    mig_card = next(iter(checkpoint(node).values()))["devices"][0]["card"]
    _delete_and_wait(kube, namespace, mig)
    wait_until(lambda: not checkpoint(node), timeout=60, what="the MIG claim to be unprepared")
    assert mig_mode(node, mig_card) == 1

    pods = [gpu_pod(f"whole-{i}", "gpu", node=node.name) for i in range(2)]

    cards = set()
    for pod in pods:
        seen = run_and_show(kube, control_plane, namespace, pod)
        assert seen.visible.startswith("GPU-")
        assert [n for n in seen.nodes if n.startswith("/dev/nvidia-caps")] == []
        cards.add(seen.visible)
    assert len(cards) == 2  # both cards whole: the one left in MIG mode too
    assert mig_mode(node, mig_card) == 0
    for pod in pods:
        _delete_and_wait(kube, namespace, pod)
    wait_until(lambda: not checkpoint(node), timeout=60, what="the whole-card claims to be unprepared")
    assert cdi_specs(node) == []


def test_a_mig_3g_pod_runs_on_an_h100(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node_b: GpuComponents
) -> None:
    node = gpu_node_b.node
    pod = gpu_pod("mig-3g", "mig-3g", node=node.name)
    seen = run_and_show(kube, control_plane, namespace, pod)

    assert seen.visible.startswith("MIG-")
    [(_card, instances)] = gpu_instances(node).items()
    [(profile, _start)] = instances
    assert profile == 9  # H100 3g.40gb
    _delete_and_wait(kube, namespace, pod)
    wait_until(lambda: not checkpoint(node), timeout=60, what="the 3g claim to be unprepared")
    assert gpu_instances(node) == {}
