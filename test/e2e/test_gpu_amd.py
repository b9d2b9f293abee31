"""AMD Instinct cards on a real node: a whole MI300X for one Pod, a CPX partition of another card for
another, the mode switched back when the partition goes, and gpu-handler killed at each step.

The node's simulated host is the ``mi300x-x8`` fixture (eight MI300X in SPX) with ``/dev/kfd`` and
each card's render node; gpu-handler runs the ``simulated-amd`` backend, whose simulated
``amdgpu`` switches a card's compute mode in the host's sysfs tree and makes the partitions'
render nodes. The real scheduler allocates through the AMD sample classes' extended resources.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Pod
from testutil.e2e.gpu_nodes import (
    Seen,
    cdi_specs,
    checkpoint,
    crashed,
    gpu_pod,
    normal_handler,
    pod_gone,
    restart_handler,
    run_and_show,
)
from testutil.k8s_fields import name_of

from pkg.backends.amd.sysfs import read_card
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD

ROOT = Path(__file__).resolve().parents[2]
AMD_CLASSES = ROOT / "config" / "samples" / "deviceclasses-amd.yaml"
SHOW_AMD = (
    "for d in /dev/kfd /dev/dri/*; do [ -c $d ] && echo node=$d; done; echo shown; "
    "exec sleep 3600"  # keep running: the kubelet unprepares a Pod's claims once it has finished
)


@pytest.fixture(scope="module")
def amd_node(node_pool: Any) -> RealNode:
    node: RealNode = node_pool.get(
        NodeConfig(name="e2e-node-mi", gpu_fixture=ROOT / "test/fixtures/sysfs/mi300x-x8")
    )
    node.host.make_device("kfd")
    for minor in range(128, 136):
        node.host.make_device(f"dri/renderD{minor}")
    return node


@pytest.fixture(scope="module")
def amd_components(control_plane: ControlPlane, amd_node: RealNode) -> Iterator[GpuComponents]:
    components = GpuComponents(
        node=amd_node,
        plane=control_plane,
        pci_ids=ROOT / "test/fixtures/pci.ids",
        driver_version=DRIVER_VERSION,
        handler_args=["--backend=simulated-amd"],
    )
    components.start()
    try:
        try:
            control_plane.kubectl("apply", "-f", str(AMD_CLASSES))
            wait_for_offers(control_plane, amd_node.name, cards=8)
            components.wait_registered()
        except Exception as exc:
            tails = "\n".join(f"--- {p.name}:\n{p.tail(30)}" for p in components.processes)
            raise RuntimeError(f"our components on {amd_node.name} did not come up: {exc}\n{tails}") from exc
        yield components
    finally:
        components.stop()


@pytest.fixture
def amd(amd_components: GpuComponents) -> Iterator[GpuComponents]:
    yield from normal_handler(amd_components)


def _mode(node: RealNode, card: str) -> str | None:
    return read_card(node.host.root, card).compute_mode


def _only_device(node: RealNode) -> dict[str, object]:
    [record] = checkpoint(node).values()
    [device] = record["devices"]
    return dict(device)


def _delete(kube: KubeClient, namespace: str, node: RealNode, pod: V1Pod) -> None:
    kube.delete(POD, name_of(pod), namespace)
    wait_until(lambda: pod_gone(kube, namespace, name_of(pod)), timeout=60, what="the Pod to go")
    wait_until(lambda: not checkpoint(node), timeout=60, what="the kubelet to unprepare the claim")


def _cpx(
    kube: KubeClient, plane: ControlPlane, namespace: str, node: RealNode, name: str
) -> tuple[Seen, str]:
    seen = run_and_show(kube, plane, namespace, gpu_pod(name, "amd-cpx", node=node.name, script=SHOW_AMD))
    card = str(_only_device(node)["card"])
    return seen, card


def test_a_whole_mi300x_and_a_cpx_partition_of_another_card(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, amd: GpuComponents
) -> None:
    node = amd.node
    whole_pod = gpu_pod("amd-whole", "amd-gpu", node=node.name, script=SHOW_AMD)
    whole = run_and_show(kube, control_plane, namespace, whole_pod)
    whole_card = str(_only_device(node)["card"])
    assert _mode(node, whole_card) == "spx"
    [render] = [n for n in whole.nodes if n.startswith("/dev/dri/")]
    assert whole.nodes == sorted(["/dev/kfd", render])
    assert render == f"/dev/dri/renderD{read_card(node.host.root, whole_card).render_minors[0]}"

    part_pod = gpu_pod("amd-cpx", "amd-cpx", node=node.name, script=SHOW_AMD)
    part = run_and_show(kube, control_plane, namespace, part_pod)
    records = checkpoint(node).values()
    [part_device] = [d for r in records for d in r["devices"] if d["deviceType"] == "Partition"]
    card = part_device["card"]
    assert card != whole_card
    assert _mode(node, card) == "cpx"  # the simulated driver switched the card
    minors = read_card(node.host.root, card).render_minors
    assert len(minors) == 8
    index = part_device["partition"]["index"]
    assert part.nodes == sorted(["/dev/kfd", f"/dev/dri/renderD{minors[index]}"])  # exactly its node

    kube.delete(POD, name_of(part_pod), namespace)
    wait_until(lambda: pod_gone(kube, namespace, name_of(part_pod)), timeout=60, what="the CPX Pod to go")
    wait_until(lambda: _mode(node, card) == "spx", timeout=60, what="the card to switch back to SPX")
    _delete(kube, namespace, node, whole_pod)
    assert cdi_specs(node) == []


@pytest.mark.parametrize(
    "point",
    [
        "prepare:record-started:after",
        "prepare:prepare-devices:after",
        "prepare:write-cdi-spec:after",
        "prepare:record-completed:after",
    ],
)
def test_gpu_handler_killed_while_preparing_a_partition_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, amd: GpuComponents, point: str
) -> None:
    node = amd.node
    restart_handler(amd, crash_at=point)
    pod = gpu_pod("amd-crash", "amd-cpx", node=node.name, script=SHOW_AMD)
    kube.create(POD, pod, namespace=namespace)
    crashed(amd)
    restart_handler(amd)

    seen = run_and_show_existing(kube, control_plane, namespace, pod)
    card = str(_only_device(node)["card"])
    assert _mode(node, card) == "cpx"
    assert len([n for n in seen.nodes if n.startswith("/dev/dri/")]) == 1
    _delete(kube, namespace, node, pod)
    assert _mode(node, card) == "spx"
    assert cdi_specs(node) == []


@pytest.mark.parametrize("point", ["unprepare:release-claim:after", "unprepare:forget-claim:before"])
def test_gpu_handler_killed_while_unpreparing_a_partition_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, amd: GpuComponents, point: str
) -> None:
    node = amd.node
    seen, card = _cpx(kube, control_plane, namespace, node, "amd-crash-u")
    assert len([n for n in seen.nodes if n.startswith("/dev/dri/")]) == 1
    restart_handler(amd, crash_at=point)
    kube.delete(POD, "amd-crash-u", namespace)
    crashed(amd)
    restart_handler(amd)

    wait_until(lambda: pod_gone(kube, namespace, "amd-crash-u"), timeout=60, what="the Pod to go")
    wait_until(lambda: not checkpoint(node), timeout=60, what="the kubelet's retry to unprepare the claim")
    assert _mode(node, card) == "spx"
    assert cdi_specs(node) == []


def run_and_show_existing(kube: KubeClient, plane: ControlPlane, namespace: str, pod: V1Pod) -> Seen:
    """Waits until the already created ``pod`` runs and has printed what it sees."""
    name = name_of(pod)
    wait_until(
        lambda: "shown" in plane.kubectl("logs", "-n", namespace, name, check=False),
        timeout=120,
        what=f"Pod {namespace}/{name} to run and show its devices",
    )
    return Seen.parse(plane.kubectl("logs", "-n", namespace, name))
