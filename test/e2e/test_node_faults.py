"""The dev cluster's node faults do to a real node what they claim, seen from outside the harness.

Each primitive the soak strikes with (:mod:`pkg.devcluster.node`, :mod:`pkg.devcluster.cluster`,
:mod:`pkg.devcluster.apilink`) is checked on a node of its own, with a Pod running on it, against
what the API server, containerd and the simulated host report: a kubelet or containerd restart
leaves the Pod's container as it was; a reboot recreates it and leaves no MIG instance and a new
boot ID; a cut API link stops the node's lease renewals until it is restored; the API answers
again after its server or etcd restarts. The node is stopped at the end and must leave nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Pod
from testutil.e2e.pods import shell_pod
from testutil.k8s_fields import status_of

from pkg.backends.simulated.driver_memory import CardRecord, GpuInstanceRecord, SimulatedDriverMemory
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpuhost import DRIVER_STATE, nvidia_cards
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NAMESPACE, POD

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
NODE = "e2e-node-faults"


@pytest.fixture(scope="module")
def fault_node(node_pool: Any) -> Iterator[RealNode]:
    """A node of these tests alone (they restart and cut it), stopped at the end and checked clean
    (the pool checks the host-wide places once every node has stopped)."""
    node: RealNode = node_pool.get(
        NodeConfig(name=NODE, gpu_fixture=FIXTURES / "a30-x2", api_link=True, plugin_folder_mib=8)
    )
    yield node
    node.stop()
    assert node.leftovers() == []


def _sleeper(kube: KubeClient, namespace: str, name: str) -> V1Pod:
    pod = shell_pod(name, "sleep 3600", node=NODE)
    assert pod.spec is not None
    pod.spec.restart_policy = "Always"  # recreated after a reboot, as a Deployment's Pod would be
    kube.create(POD, pod, namespace=namespace)
    wait_until(lambda: _running(kube, namespace, name), timeout=60, what=f"Pod {name} to run")
    return kube.get(POD, name, namespace)


def _running(kube: KubeClient, namespace: str, name: str) -> bool:
    status = status_of(kube.get(POD, name, namespace))
    containers = status.container_statuses or []
    return status.phase == "Running" and bool(containers) and all(c.ready for c in containers)


def _container(pod: V1Pod) -> tuple[str, int]:
    """The container's ID and restart count."""
    (container,) = status_of(pod).container_statuses or []
    return str(container.container_id), int(container.restart_count)


def _lease_renewed(plane: ControlPlane) -> str:
    return plane.kubectl("get", "lease", "-n", "kube-node-lease", NODE, "-o", "jsonpath={.spec.renewTime}")


def test_the_pod_survives_kubelet_and_containerd_restarts(
    kube: KubeClient, namespace: str, fault_node: RealNode
) -> None:
    before = _container(_sleeper(kube, namespace, "survivor"))

    fault_node.restart_kubelet(crash=True)
    assert _running(kube, namespace, "survivor")
    fault_node.restart_containerd(crash=True)
    time.sleep(6)  # two kubelet syncs: a container the kubelet lost would be replaced by now

    assert _running(kube, namespace, "survivor")
    assert _container(kube.get(POD, "survivor", namespace)) == before


def test_a_reboot_recreates_the_container_and_loses_the_host_s_volatile_state(
    kube: KubeClient, namespace: str, fault_node: RealNode
) -> None:
    before_id, _ = _container(_sleeper(kube, namespace, "rebooted"))
    memory = SimulatedDriverMemory(fault_node.host.nvml_state / DRIVER_STATE)
    card = nvidia_cards(fault_node.host.root)[0]

    def one_gpu_instance(record: CardRecord) -> None:
        record.mig_mode = 1
        record.gpu_instances = [GpuInstanceRecord(id=1, profile_id=0, start=0, size=1)]

    memory.change(card, one_gpu_instance)
    boot_before = fault_node.boot_id()
    kept = fault_node.plugin_folder / "kept-on-disk"
    kept.write_text("checkpoint")

    fault_node.reboot()

    assert fault_node.boot_id() != boot_before
    # The plugin folder stands for disk: its tmpfs (and the kubelet root's bind that carries it)
    # outlive the reboot with what was written there, and it can still be filled.
    assert os.path.ismount(fault_node.plugin_folder)
    assert kept.read_text() == "checkpoint"
    fault_node.fill_plugin_folder()
    fault_node.free_plugin_folder()
    after = memory.card(card)
    assert (after.mig_mode, after.gpu_instances) == (1, [])
    wait_until(
        lambda: (
            _running(kube, namespace, "rebooted")
            and _container(kube.get(POD, "rebooted", namespace))[0] != before_id
        ),
        timeout=90,
        what="the rebooted node's Pod to run in a new container",
    )


def test_a_cut_api_link_stops_the_node_s_lease_until_restored(
    kube: KubeClient, control_plane: ControlPlane, fault_node: RealNode
) -> None:
    link = fault_node.api_link
    assert link is not None
    renewed = _lease_renewed(control_plane)
    wait_until(lambda: _lease_renewed(control_plane) != renewed, timeout=30, what="a lease renewal")

    link.cut()
    try:
        time.sleep(2)  # a renewal already on its way may still land
        cut_at = _lease_renewed(control_plane)
        time.sleep(22)  # two renewal periods (10 s) and more
        assert _lease_renewed(control_plane) == cut_at
    finally:
        link.restore()

    wait_until(lambda: _lease_renewed(control_plane) != cut_at, timeout=40, what="lease renewals to resume")


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_the_api_answers_again_after_a_control_plane_restart(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, fault_node: RealNode, component: str
) -> None:
    restart = control_plane.restart_apiserver if component == "kube-apiserver" else control_plane.restart_etcd

    restart(crash=True)

    wait_until(lambda: bool(kube.get(NAMESPACE, namespace)), timeout=30, what="the API to answer")
    assert _lease_renewed(control_plane)
