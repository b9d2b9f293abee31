"""Topology on a real node: an HGX H100 host's GPUs, paired with its NICs, in Pods that run.

The node runs kubelet + containerd over the simulated ``hgx-h100`` host (eight H100s behind PCIe
switches, a ConnectX-7 NIC beside each, four NVSwitches); gpu-node-agent and gpu-handler publish
its offers as on any node, with the PCIe root, NUMA node and NVLink domain of each card. The NICs
come from the test tree's second driver (``test/nic_driver.py``): its ResourceSlice, and a kubelet
plugin of the project's framework that prepares a NIC by injecting nothing (there is no NIC to set
up), so the kubelet can start a Pod that holds one.

The real scheduler allocates the claims of docs/topology.md; the Pods run, and each test reads
the allocation against the slices gpu-handler published.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1DeviceRequestAllocationResult
from testutil.e2e.gpu_nodes import SHOW_DEVICES, checkpoint, claim_pod, pod_gone, run_and_show
from testutil.k8s_fields import allocation_results, name_of
from testutil.nic_driver import DRIVER as NIC_DRIVER
from testutil.nic_driver import nic_class, nic_slice
from testutil.topology_claims import NVLINK_DOMAIN, PCIE_ROOT, gpu_with_nic, gpus_in_one_nvlink_domain
from testutil.topology_claims import whole_gpu_class as gpu_class

from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.node import NodeConfig
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.kubeletplugin.types import (
    ClaimRef,
    HealthBoard,
    PluginIdentity,
    PreparedDevice,
    PrepareOutcome,
)

ROOT = Path(__file__).resolve().parents[2]
HGX = ROOT / "test" / "fixtures" / "sysfs" / "hgx-h100"
PCI_IDS = ROOT / "test" / "fixtures" / "pci.ids"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"


class NothingToPrepare:
    """The NIC driver's kubelet side: a NIC needs no setup here, so each of a claim's NICs is
    prepared with no CDI device, and unprepared with nothing to undo."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        outcomes = {}
        for ref in claims:
            claim = self._kube.get(RESOURCE_CLAIM, ref.name, ref.namespace)
            results = allocation_results(claim)
            outcomes[ref.uid] = PrepareOutcome(
                devices=tuple(
                    PreparedDevice(
                        pool=str(r.pool), device=str(r.device), cdi_device_ids=(), requests=(r.request,)
                    )
                    for r in results
                    if r.driver == NIC_DRIVER
                )
            )
        return outcomes

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        return {c.uid: "" for c in claims}


@dataclass
class HgxNode:
    components: GpuComponents
    kube: KubeClient
    gpu_class: str
    nic_class: str

    @property
    def name(self) -> str:
        return self.components.node.name

    def attribute(self, result: V1DeviceRequestAllocationResult, name: str) -> str | None:
        """``name`` of an allocated device, as its driver published it on this node."""
        slices, _ = self.kube.list(RESOURCE_SLICE)
        for rs in slices:
            spec = rs.spec
            if spec.node_name != self.name or (spec.driver, spec.pool.name) != (result.driver, result.pool):
                continue
            for device in spec.devices or ():
                if device.name == result.device:
                    value = (device.attributes or {}).get(name)
                    return None if value is None else value.string
        raise AssertionError(f"no published device {result.driver}/{result.pool}/{result.device}")


@pytest.fixture(scope="module")
def hgx_node(control_plane: ControlPlane, node_pool: Any, kube: KubeClient) -> Iterator[HgxNode]:
    """The HGX host as a real node with our components, its NICs published and pluggable."""
    # A name as short as the other nodes': the plugins' socket paths under its kubelet root must fit.
    node = node_pool.get(NodeConfig(name="e2e-node-h", gpu_fixture=HGX))
    components = GpuComponents(node=node, plane=control_plane, pci_ids=PCI_IDS, driver_version=DRIVER_VERSION)
    components.start()
    plugin = KubeletPlugin(
        identity=PluginIdentity(driver=NIC_DRIVER, instance="e2e-topology"),
        kubelet_root=Path(node.kubelet.paths.root),
        driver=NothingToPrepare(kube),
        health=HealthBoard(),
    )
    created: list[tuple[Any, str]] = []
    try:
        wait_for_offers(control_plane, node.name, cards=8)
        components.wait_registered()
        created.append((RESOURCE_SLICE, name_of(kube.create(RESOURCE_SLICE, nic_slice(node.name, HGX)))))
        created.append((DEVICE_CLASS, name_of(kube.create(DEVICE_CLASS, gpu_class("topology-gpu-whole")))))
        created.append((DEVICE_CLASS, name_of(kube.create(DEVICE_CLASS, nic_class("topology-nic")))))
        plugin.start()
        yield HgxNode(components, kube, "topology-gpu-whole", "topology-nic")
    finally:
        plugin.stop()
        for kind, name in reversed(created):
            kube.delete(kind, name)
        components.stop()


def _run(
    hgx: HgxNode, plane: ControlPlane, namespace: str, claim: ResourceV1ResourceClaim
) -> list[V1DeviceRequestAllocationResult]:
    """Creates ``claim`` and a Pod on the node using it; once it runs, the claim's devices."""
    name = name_of(claim)
    hgx.kube.create(RESOURCE_CLAIM, claim, namespace=namespace)
    run_and_show(hgx.kube, plane, namespace, claim_pod(name, name, node=hgx.name, script=SHOW_DEVICES))
    return allocation_results(hgx.kube.get(RESOURCE_CLAIM, name, namespace))


def _release(hgx: HgxNode, namespace: str, name: str) -> None:
    hgx.kube.delete(POD, name, namespace)
    wait_until(lambda: pod_gone(hgx.kube, namespace, name), timeout=90, what="the Pod to go")
    wait_until(lambda: not checkpoint(hgx.components.node), timeout=60, what="the claim to be unprepared")


def test_a_pod_gets_a_gpu_and_the_nic_under_its_pcie_root(
    hgx_node: HgxNode, control_plane: ControlPlane, namespace: str
) -> None:
    claim = gpu_with_nic("pair", namespace, gpu_class=hgx_node.gpu_class, nic_class=hgx_node.nic_class)
    results = {r.request: r for r in _run(hgx_node, control_plane, namespace, claim)}
    assert results["nic"].driver == NIC_DRIVER
    root = hgx_node.attribute(results["gpu"], PCIE_ROOT)
    assert root is not None
    assert hgx_node.attribute(results["nic"], PCIE_ROOT) == root
    [record] = checkpoint(hgx_node.components.node).values()  # gpu-handler prepared the GPU
    assert [d["card"] for d in record["devices"]] == [hgx_node.attribute(results["gpu"], PCI_BUS_ID)]
    _release(hgx_node, namespace, "pair")


def test_a_pod_gets_two_gpus_of_one_nvlink_domain(
    hgx_node: HgxNode, control_plane: ControlPlane, namespace: str
) -> None:
    claim = gpus_in_one_nvlink_domain("train", namespace, gpu_class=hgx_node.gpu_class)
    results = _run(hgx_node, control_plane, namespace, claim)
    domains = {hgx_node.attribute(r, NVLINK_DOMAIN) for r in results}
    assert len(results) == 2
    assert len(domains) == 1
    assert None not in domains
    [record] = checkpoint(hgx_node.components.node).values()
    assert len(record["devices"]) == 2
    _release(hgx_node, namespace, "train")
