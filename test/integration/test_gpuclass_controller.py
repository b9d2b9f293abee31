"""GPUClass → DeviceClass against the real API server and kube-scheduler.

The real node agent and gpu-handler publish the offers of the ``h100-and-l4`` fixture host (an H100
with MIG, an L4 without) once gpu-controller has made the cards DriverReady from a Ready validator
Pod. Every generated DeviceClass must be accepted by the API server, and a Pod asking for its
extended resource must be scheduled by the real kube-scheduler onto exactly the kind of device the
class describes: CEL in the Kubernetes form (docs/architecture.md#cel-selectors-in-the-kubernetes-form),
including ``names`` (matched by the cards' UUIDs) and ``minMemory``/``minComputeCapability``. Classes the
controller must refuse (a foreign DeviceClass of the same name, a DeviceClass the server rejects) report why,
and deleting a class deletes its DeviceClass.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Container, V1ObjectMeta, V1Pod, V1PodSpec, V1ResourceRequirements
from testutil.cluster_views import offers
from testutil.integration.dra_objects import create_ready_node, device_class
from testutil.integration.gpu_controller_helpers import (
    create_validator_pod,
    delete_now,
    gpu_controller,
    report_validator,
)
from testutil.integration.process_helpers import eventually, node_components
from testutil.k8s_fields import allocation_results, meta, present, spec_of

from api.gpu.v1alpha1 import LABEL_NODE, Generated, GPUClass
from pkg.domain.kinds import GPU_CLASS, PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM

pytestmark = pytest.mark.dra_api

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
H100, L4 = "gpu-0000-1b-00-0", "gpu-0000-ce-00-0"
OFFERS = 25 + 3 + 3  # the H100's MIG placements, each card's time slicing, MPS and whole offers

# (class suffix, spec, the devices a Pod of the class may get)
CLASSES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("l4", {"deviceType": "Physical", "selector": {"matchLabels": {"gpu.deckhouse.io/device": "l4"}}}, {L4}),
    (
        "mig",
        {"deviceType": "MIG", "nvidia": {"mig": {"profile": "3g.40gb"}}},
        {f"{H100}-mig-9-0", f"{H100}-mig-9-4"},
    ),
    (
        "big-ts",
        {
            "deviceType": "Physical",
            "sharing": {"strategy": "TimeSlicing"},
            "requirements": {"minMemory": "40Gi"},
        },
        {f"{H100}-ts"},
    ),
    ("hopper", {"deviceType": "Physical", "requirements": {"minComputeCapability": "9.0"}}, {H100}),
    (
        "named-mps",
        {"deviceType": "Physical", "sharing": {"strategy": "MPS"}, "names": ["{node}-1-10de-27b8"]},
        {f"{L4}-mps"},
    ),
    (
        "custom",
        {"deviceType": "Physical", "extendedResourceName": "example.com/any-gpu", "vendor": "Nvidia"},
        {H100, L4},
    ),
]


def make_class(kube: KubeClient, name: str, spec: dict[str, Any]) -> None:
    kube.create(
        GPU_CLASS, GPUClass.from_api_dict({"metadata": {"name": name}, "spec": {"vendor": "Nvidia", **spec}})
    )


def status(kube: KubeClient, name: str) -> Any:
    return kube.get(GPU_CLASS, name).status


def valid_and_generated(kube: KubeClient, name: str) -> Generated | None:
    found = kube.get(GPU_CLASS, name).status
    return found.generated if found is not None and found.valid else None


def node_of(kube: KubeClient, namespace: str, pod: str) -> str | None:
    return spec_of(kube.get(POD, pod, namespace)).node_name


def released(kube: KubeClient, namespace: str, pod: str) -> bool:
    return allocated(kube, namespace, pod) is None


def allocated(kube: KubeClient, namespace: str, pod: str) -> str | None:
    claims, _ = kube.list(RESOURCE_CLAIM, namespace=namespace)
    for claim in claims:
        owners = [o.name for o in meta(claim).owner_references or []]
        if pod in owners and claim.status and claim.status.allocation:
            [result] = allocation_results(claim)
            return str(result.device)
    return None


def gpu_pod(name: str, resource: str) -> V1Pod:
    limits = {resource: "1"}
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(
            containers=[
                V1Container(
                    name="app", image="app", resources=V1ResourceRequirements(limits=limits, requests=limits)
                )
            ]
        ),
    )


@pytest.fixture
def offered_node(kube: KubeClient, kubeconfig: str, namespace: str, unique: str, tmp_path: Path) -> Any:
    """A node whose two cards are offered: node components running, gpu-controller, a Ready validator."""
    node = f"gc-{unique}"
    create_ready_node(kube, node)
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "sysfs" / "h100-and-l4", root, symlinks=True)
    try:
        with (
            node_components(kubeconfig, node, root=root, state=tmp_path / "nvml", logs=tmp_path),
            gpu_controller(kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log"),
        ):
            create_validator_pod(kube, namespace, node)
            report_validator(kube, namespace, ready=True)
            eventually(lambda: offers(kube, node) == OFFERS, what="both cards offered", timeout=90)
            yield node
    finally:
        delete_now(kube, namespace)
        items, _ = kube.list(PHYSICAL_GPU, label_selector=f"{LABEL_NODE}={node}")
        for gpu in items:
            kube.delete(PHYSICAL_GPU, str(gpu.metadata.name))
        kube.delete(NODE, node)


def test_every_generated_device_class_schedules_a_pod_onto_its_kind_of_device(
    kube: KubeClient, namespace: str, unique: str, offered_node: str
) -> None:
    names = []
    try:
        for suffix, template, expected in CLASSES:
            name = f"{suffix}-{unique}"
            names.append(name)
            spec = (
                {**template, "names": [n.format(node=offered_node) for n in template["names"]]}
                if "names" in template
                else template
            )
            make_class(kube, name, spec)
            generated = eventually(functools.partial(valid_and_generated, kube, name), what=f"{name} valid")
            resource = spec.get("extendedResourceName", f"gpu.deckhouse.io/{name}")
            assert (generated.device_class_name, generated.extended_resource_name) == (name, resource)
            assert spec_of(kube.get(DEVICE_CLASS, name)).extended_resource_name == resource
            pod = f"pod-{suffix}"
            kube.create(POD, gpu_pod(pod, resource), namespace=namespace)
            device = eventually(
                functools.partial(allocated, kube, namespace, pod), what=f"{pod} allocated", timeout=60
            )
            assert device in expected, f"class {suffix} got {device}"
            # The scheduler writes the claim's allocation before it binds the Pod.
            bound = eventually(
                functools.partial(node_of, kube, namespace, pod), what=f"{pod} bound", timeout=60
            )
            assert bound == offered_node
            delete_now(kube, namespace, pod)
            eventually(
                functools.partial(released, kube, namespace, pod),
                what=f"{pod}'s claim released",
                timeout=60,
            )
        # Deleting a class deletes its DeviceClass (the garbage collector, through the owner).
        kube.delete(GPU_CLASS, names[0])
        eventually(lambda: _gone(kube, names[0]), what="the DeviceClass of a deleted class", timeout=60)
    finally:
        for name in names:
            with contextlib.suppress(NotFoundError):
                kube.delete(GPU_CLASS, name)


def test_a_class_that_cannot_be_a_device_class_says_why(
    kube: KubeClient, kubeconfig: str, namespace: str, unique: str, tmp_path: Path
) -> None:
    taken, refused = f"taken-{unique}", f"refused-{unique}"
    kube.create(DEVICE_CLASS, device_class(taken, cel="true"))
    try:
        with gpu_controller(kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log"):
            make_class(kube, taken, {"deviceType": "Physical"})
            make_class(kube, refused, {"deviceType": "Physical", "extendedResourceName": "kubernetes.io/gpu"})
            eventually(lambda: (s := status(kube, taken)) and s.valid is False, what="the taken name refused")
            assert "was not generated from this GPUClass" in status(kube, taken).message
            assert (
                present(present(spec_of(kube.get(DEVICE_CLASS, taken)).selectors)[0].cel).expression == "true"
            )  # never taken over
            eventually(lambda: (s := status(kube, refused)) and s.valid is False, what="the server's refusal")
            assert "the API server refused DeviceClass" in status(kube, refused).message
            assert "extendedResourceName" in status(kube, refused).message
            # Freeing the name lets the class generate its own.
            kube.delete(DEVICE_CLASS, taken)
            eventually(
                lambda: (s := status(kube, taken)) and s.valid, what="the class valid once the name is free"
            )
    finally:
        for name in (taken, refused):
            with contextlib.suppress(NotFoundError):
                kube.delete(GPU_CLASS, name)
        with contextlib.suppress(NotFoundError):
            kube.delete(DEVICE_CLASS, taken)


def _gone(kube: KubeClient, name: str) -> bool:
    try:
        kube.get(DEVICE_CLASS, name)
    except NotFoundError:
        return True
    return False
