"""gpu-dra-controller as a process, and the GPU nodes its integration tests allocate from.

Shared by ``test_dra_controller.py`` and ``test_dra_controller_race.py``: each test module runs one
controller (the ``controller`` fixture, module-scoped; import it into the module to use it), and
every test publishes its own node with one A30 built by the real offer builder
(``pkg.dra.model.offers``/``slices``) and DeviceClasses that select only that node's card model
(a unique ``device`` attribute), so tests never see each other's devices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1Container,
    V1DeviceClaim,
    V1DeviceRequest,
    V1ExactDeviceRequest,
    V1Namespace,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1ResourceClaimSpec,
    V1ResourceRequirements,
)

from pkg.devcluster.processes import free_port, ready
from pkg.dra.model.card import Card, Engines, MigProfileSpec, Placement
from pkg.dra.model.offers import build_offers
from pkg.dra.model.slices import build_slices, read_server_version
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import (
    DEVICE_CLASS,
    EVENT,
    NAMESPACE,
    NODE,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
)
from testutil.integration.dra_objects import DRIVER, create_ready_node, device_class
from testutil.integration.process_helpers import eventually, running
from testutil.k8s_fields import allocation_results, meta, name_of

ALLOCATED_BY = "gpu.deckhouse.io/allocated-by"
FIELD_MANAGER = "gpu-dra-controller"
FINALIZER = "resource.kubernetes.io/delete-protection"


def a30(model: str) -> Card:
    """An A30 with two MIG profiles (1g.6gb, 4g.24gb); ``model`` is its ``device`` attribute."""
    profiles = (
        MigProfileSpec(14, "1g.6gb", 5952, 1, tuple(Placement(s, 1) for s in range(4)), Engines(14, 1)),
        MigProfileSpec(0, "4g.24gb", 24192, 4, (Placement(0, 4),), Engines(56, 4)),
    )

    return Card(
        physical_gpu=f"{model}-0",
        pci_address="0000:02:00.0",
        product_name="NVIDIA A30",
        device=model,
        memory_mib=24576,
        mig_profiles=profiles,
    )


class GpuNode:
    """A node with one A30 and a class per offer kind that selects only this node's card."""

    def __init__(self, kube: KubeClient, unique: str) -> None:
        self.kube, self.name, self.model = kube, f"dra-{unique}", f"a30-{unique}"
        create_ready_node(kube, self.name)
        self.slices = build_slices(
            node=self.name,
            cards=[build_offers(a30(self.model))],
            generation=1,
            layout=read_server_version(kube).layout,  # the layout the server's version wants
        )
        for rs in self.slices:
            kube.create(RESOURCE_SLICE, rs)
        a = f'device.attributes["{DRIVER}"]'
        base = f'device.driver == "{DRIVER}" && {a}.device == "{self.model}"'
        self.classes = {  # && short-circuits: the last attribute exists only on those offers
            "physical": f'{base} && {a}.deviceType == "Physical" && {a}.sharingStrategy == "Exclusive"',
            "mig": f'{base} && {a}.deviceType == "MIG" && {a}.migProfile == "1g.6gb"',
        }
        for kind, cel in self.classes.items():
            kube.create(DEVICE_CLASS, device_class(self.cls(kind), cel=cel))

    def cls(self, kind: str) -> str:
        return f"{kind}-{self.model}"

    def delete(self) -> None:
        for kind in self.classes:
            self.kube.delete(DEVICE_CLASS, self.cls(kind))
        for rs in self.slices:
            self.kube.delete(RESOURCE_SLICE, name_of(rs))
        self.kube.delete(NODE, self.name)


@pytest.fixture(scope="module")
def controller(kube: KubeClient, kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """Runs gpu-dra-controller for the module; yields its metrics port."""
    lease_ns = "dra-controller-lease"
    with contextlib.suppress(Exception):
        kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=lease_ns)))
    port = free_port()
    log = tmp_path_factory.mktemp("dra-controller") / "gpu-dra-controller.log"
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{port}",
        f"--leader-election-namespace={lease_ns}",
        "--leader-election-id=gpu-dra-controller-test",
    ]
    with running("pkg.app.gpu_dra_controller", args, log_path=log):
        eventually(lambda: ready(port), timeout=60, what="gpu-dra-controller ready")
        yield port


@pytest.fixture
def gpu_node(kube: KubeClient, unique: str) -> Iterator[GpuNode]:
    node = GpuNode(kube, unique)
    yield node
    node.delete()


def new_claim(name: str, namespace: str, device_class_name: str) -> ResourceV1ResourceClaim:
    request = V1DeviceRequest(name="gpu", exactly=V1ExactDeviceRequest(device_class_name=device_class_name))
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1ResourceClaimSpec(devices=V1DeviceClaim(requests=[request])),
    )


def allocated_devices(kube: KubeClient, namespace: str, name: str) -> list[str] | None:
    try:
        claim = kube.get(RESOURCE_CLAIM, name, namespace)
    except NotFoundError:
        return None
    allocation = claim.status.allocation if claim.status else None
    return [r.device for r in allocation_results(allocation)] if allocation else None


def events_for(kube: KubeClient, namespace: str, name: str, reason: str) -> list[str]:
    events, _ = kube.list(EVENT, namespace=namespace)
    return [e.note or "" for e in events if e.reason == reason and e.regarding and e.regarding.name == name]


def pending_pod(name: str, namespace: str, claim_name: str) -> V1Pod:
    """A Pod referencing ``claim_name`` that no node can take (its node selector matches none),
    so the scheduler never allocates the claim: an allocation can only be ours."""
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1PodSpec(
            node_selector={"kubernetes.io/hostname": "no-such-node"},
            resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name=claim_name)],
            containers=[
                V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=V1ResourceRequirements(claims=[{"name": "gpu"}]),
                )
            ],
        ),
    )


def written_by_us(claim: ResourceV1ResourceClaim) -> bool:
    """Whether the controller ever wrote this claim: an allocation, its mark, or its field manager."""
    allocated = claim.status is not None and claim.status.allocation is not None
    marked = ALLOCATED_BY in (meta(claim).annotations or {})
    managers = {m.manager for m in meta(claim).managed_fields or ()}
    return allocated or marked or FIELD_MANAGER in managers
