"""The real kube-scheduler and gpu-dra-controller place topology-constrained claims.

Two nodes publish what gpu-handler publishes for the fixture hosts (``gpu-handler offers`` over
the simulated NVML): an HGX H100 board (8 cards, one NVLink domain through NVSwitches, each card
under its own PCIe root with its own NIC) and a PCIe server with two switches (two L4s and a NIC
under each, no NVLink). The NICs come from the test tree's second driver (``test/nic_driver.py``),
with ``resource.kubernetes.io/pcieRoot`` as any NIC driver publishes it. The claims are those of
docs/topology.md (``test/topology_claims.py``).

* The scheduler (Pods pinned to a node): a GPU and a NIC under one root — also when the NIC under
  the first switch is already taken, so the first GPU it tries cannot be used; two GPUs of one
  NVLink domain on the HGX node; on the PCIe node the same claim stays pending, and
  ``gpu-dra-controller explain`` names the constraint.
* gpu-dra-controller (claims no Pod references): two GPUs of one NVLink domain land on the HGX
  node; two GPUs under one PCIe root on the PCIe node (the only node with two cards under one
  root); three GPUs under one root fit nowhere, and its ``AllocationFailed`` event names the
  constraint and how the roots split the cards.

The nodes have no kubelet: Pods are bound, never run (the e2e tier runs real ones).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1Container,
    V1DeviceConstraint,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1ResourceRequirements,
    V1ResourceSlice,
)
from test_allocator_differential import wait_scheduled
from testutil.integration.dra_controller_process import controller, events_for
from testutil.integration.dra_objects import create_ready_node
from testutil.integration.process_helpers import eventually
from testutil.k8s_fields import allocation_results, name_of
from testutil.nic_driver import nic_class, nic_slice
from testutil.topology_claims import (
    NVLINK_DOMAIN,
    PCIE_ROOT,
    claim,
    gpu_with_nic,
    gpus_in_one_nvlink_domain,
    request,
)
from testutil.topology_claims import whole_gpu_class as gpu_class

from pkg.dra.model.slices import read_server_version
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

__all__ = ["controller"]  # the gpu-dra-controller fixture, imported to be used here

pytestmark = pytest.mark.dra_api

ROOT = Path(__file__).resolve().parents[2]
SYSFS = ROOT / "test" / "fixtures" / "sysfs"
HOSTNAME = "kubernetes.io/hostname"


@dataclass
class Cluster:
    kube: KubeClient
    hgx: str
    pcie: str
    gpu_class: str
    nic_class: str
    slices: list[V1ResourceSlice]

    def attribute(self, result: V1DeviceRequestAllocationResult, name: str) -> str | None:
        for rs in self.slices:
            for device in rs.spec.devices or ():
                if (rs.spec.driver, rs.spec.pool.name, device.name) == (
                    result.driver,
                    result.pool,
                    result.device,
                ):
                    value = (device.attributes or {}).get(name)
                    return None if value is None else value.string
        raise AssertionError(f"no device {result.driver}/{result.pool}/{result.device}")


@pytest.fixture
def cluster(kube: KubeClient, unique: str) -> Iterator[Cluster]:
    hgx, pcie = f"topo-hgx-{unique}", f"topo-pcie-{unique}"
    slices: list[V1ResourceSlice] = []
    version = read_server_version(kube)  # the slices in the layout this server wants
    for node, scenario in ((hgx, "hgx-h100"), (pcie, "pcie-l4-switches")):
        create_ready_node(kube, node, labels={HOSTNAME: node})
        offered = compute_offers(
            OfflineRequest(
                node_name=node,
                sysfs_root=SYSFS / scenario,
                backend="simulated-nvidia",
                server_version=version,
            )
        )
        for rs in (*offered.slices, nic_slice(node, SYSFS / scenario)):
            slices.append(kube.create(RESOURCE_SLICE, rs))
    # Only cards with a PCIe root: this test's, never another test's (whose cards publish none).
    guard = 'has(device.attributes["resource.kubernetes.io"].pcieRoot)'
    gpus = kube.create(DEVICE_CLASS, gpu_class(f"gpu-whole-{unique}", guard=guard))
    nics = kube.create(DEVICE_CLASS, nic_class(f"nic-{unique}"))
    try:
        yield Cluster(kube, hgx, pcie, name_of(gpus), name_of(nics), slices)
    finally:
        for name in (name_of(gpus), name_of(nics)):
            kube.delete(DEVICE_CLASS, name)
        for rs in slices:
            kube.delete(RESOURCE_SLICE, name_of(rs))
        for node in (hgx, pcie):
            kube.delete(NODE, node)


def pod_on(node: str, name: str, namespace: str, claim_name: str) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1PodSpec(
            node_selector={HOSTNAME: node},
            resource_claims=[V1PodResourceClaim(name="devices", resource_claim_name=claim_name)],
            containers=[
                V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=V1ResourceRequirements(claims=[{"name": "devices"}]),
                )
            ],
        ),
    )


def schedule(cluster: Cluster, namespace: str, node: str, wanted: ResourceV1ResourceClaim) -> bool:
    """Creates the claim and a Pod on ``node`` using it; whether the scheduler bound the Pod."""
    kube = cluster.kube
    kube.create(RESOURCE_CLAIM, wanted)
    name = name_of(wanted)
    kube.create(POD, pod_on(node, name, namespace, name))
    return wait_scheduled(kube, namespace, name)


def results_of(kube: KubeClient, namespace: str, name: str) -> list[V1DeviceRequestAllocationResult]:
    claim_now = kube.get(RESOURCE_CLAIM, name, namespace)
    allocation = claim_now.status.allocation if claim_now.status else None
    return allocation_results(allocation) if allocation else []


def test_the_scheduler_puts_a_gpu_and_its_nic_under_one_pcie_root(cluster: Cluster, namespace: str) -> None:
    wanted = gpu_with_nic("pair", namespace, gpu_class=cluster.gpu_class, nic_class=cluster.nic_class)
    assert schedule(cluster, namespace, cluster.hgx, wanted)
    results = {r.request: r for r in results_of(cluster.kube, namespace, "pair")}
    assert set(results) == {"gpu", "nic"}
    assert cluster.attribute(results["gpu"], PCIE_ROOT) == cluster.attribute(results["nic"], PCIE_ROOT)
    assert cluster.attribute(results["gpu"], PCIE_ROOT) is not None


def test_the_scheduler_skips_a_gpu_whose_root_has_no_free_nic(cluster: Cluster, namespace: str) -> None:
    """The first switch's NIC is taken: its GPUs, first in the scheduler's order, cannot pair."""
    selector = 'device.attributes["resource.kubernetes.io"].pciBusID == "0000:4f:00.0"'
    nic_only = claim("first-nic", namespace, [request("nic", cluster.nic_class, selector=selector)], [])
    assert schedule(cluster, namespace, cluster.pcie, nic_only)
    wanted = gpu_with_nic("pair", namespace, gpu_class=cluster.gpu_class, nic_class=cluster.nic_class)
    assert schedule(cluster, namespace, cluster.pcie, wanted)
    results = {r.request: r.device for r in results_of(cluster.kube, namespace, "pair")}
    assert results["nic"] == "nic-0000-cf-00-0"
    assert results["gpu"] in ("gpu-0000-cd-00-0", "gpu-0000-ce-00-0")


def test_the_scheduler_gives_two_gpus_of_one_nvlink_domain(cluster: Cluster, namespace: str) -> None:
    wanted = gpus_in_one_nvlink_domain("pair", namespace, gpu_class=cluster.gpu_class)
    assert schedule(cluster, namespace, cluster.hgx, wanted)
    results = results_of(cluster.kube, namespace, "pair")
    domains = {cluster.attribute(r, NVLINK_DOMAIN) for r in results}
    assert len(results) == 2
    assert len(domains) == 1
    assert None not in domains


def test_without_nvlink_the_claim_stays_pending_and_explain_names_the_constraint(
    cluster: Cluster, namespace: str, kubeconfig: str
) -> None:
    wanted = gpus_in_one_nvlink_domain("pair", namespace, gpu_class=cluster.gpu_class)
    assert not schedule(cluster, namespace, cluster.pcie, wanted)
    assert results_of(cluster.kube, namespace, "pair") == []
    command = [sys.executable, "-m", "pkg.app.gpu_dra_controller", "explain", f"{namespace}/pair"]
    command += [f"--kubeconfig={kubeconfig}", f"--node={cluster.pcie}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    label = f"constraint #0 matchAttribute {NVLINK_DOMAIN} over gpus"
    assert f"{label}: CANNOT be met" in done.stdout
    assert f"{cluster.pcie}/(attribute missing): gpus 4/2" in done.stdout


def one_root() -> V1DeviceConstraint:
    return V1DeviceConstraint(requests=["gpus"], match_attribute=PCIE_ROOT)


def _allocated(kube: KubeClient, namespace: str, name: str) -> list[V1DeviceRequestAllocationResult] | None:
    try:
        return results_of(kube, namespace, name) or None
    except NotFoundError:
        return None


def test_gpu_dra_controller_places_constrained_claims(
    cluster: Cluster, namespace: str, controller: int
) -> None:
    kube = cluster.kube
    kube.create(RESOURCE_CLAIM, gpus_in_one_nvlink_domain("nvlink", namespace, gpu_class=cluster.gpu_class))
    kube.create(
        RESOURCE_CLAIM, claim("root", namespace, [request("gpus", cluster.gpu_class, 2)], [one_root()])
    )

    nvlink = eventually(lambda: _allocated(kube, namespace, "nvlink"), what="the NVLink claim allocated")
    assert {r.pool for r in nvlink} == {f"gpus/{cluster.hgx}"}
    assert len({cluster.attribute(r, NVLINK_DOMAIN) for r in nvlink}) == 1
    root = eventually(lambda: _allocated(kube, namespace, "root"), what="the same-root claim allocated")
    assert {r.pool for r in root} == {f"gpus/{cluster.pcie}"}  # the only node with two cards per root
    assert len({cluster.attribute(r, PCIE_ROOT) for r in root}) == 1


def test_gpu_dra_controller_names_the_constraint_that_splits_the_cards(
    cluster: Cluster, namespace: str, controller: int
) -> None:
    kube = cluster.kube
    kube.create(
        RESOURCE_CLAIM, claim("three", namespace, [request("gpus", cluster.gpu_class, 3)], [one_root()])
    )
    notes = eventually(
        lambda: events_for(kube, namespace, "three", "AllocationFailed"), what="an AllocationFailed event"
    )
    assert f"constraint #0 matchAttribute {PCIE_ROOT} over gpus cannot be met" in notes[0]
    assert f"{cluster.pcie}/pci0000:4a: gpus 2/3 | {cluster.pcie}/pci0000:ca: gpus 2/3" in notes[0]
    assert _allocated(kube, namespace, "three") is None
