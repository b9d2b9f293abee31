"""A compute domain's Pods land in one NVLink clique, with the real kube-scheduler.

Four Nodes, two per clique (two cliques of one cluster UUID), each offering channel devices as
gpu-handler publishes them on a fabric node and one GPU with the same ``nvlinkDomain``. A domain
with ``spec.devices`` (one GPU per Pod) and four Pods referencing its template: the scheduled Pods
land only on the nodes of the domain's clique (``status.nvlinkDomain``), none on the other clique's
although it has free devices; each Pod's claim holds the domain's channel and a GPU of the same
clique (the matchAttribute constraint); the two Pods the clique cannot hold stay Pending.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Container, V1ObjectMeta, V1Pod, V1PodResourceClaim, V1PodSpec
from testutil.compute_domains import CLIQUE_A, CLIQUE_B, channel_pool
from testutil.integration.dra_objects import create_ready_node, device_class
from testutil.integration.gpu_controller_helpers import gpu_controller
from testutil.integration.process_helpers import eventually
from testutil.k8s_fields import meta, spec_of

from api.gpu.v1alpha1 import ComputeDomain
from pkg.devcluster.cluster import ControlPlane
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)

pytestmark = pytest.mark.dra_api

PODS = 4


@pytest.fixture
def racks(kube: KubeClient, unique: str) -> Iterator[dict[str, str]]:
    """node -> clique: two nodes in each clique, each with channel devices and one GPU."""
    nodes = {f"cq-{unique}-{i}": (CLIQUE_A if i < 2 else CLIQUE_B) for i in range(4)}
    for node, clique in nodes.items():
        create_ready_node(kube, node)
        kube.create(RESOURCE_SLICE, channel_pool(node, clique, channels=4, gpus=1))
    try:
        yield nodes
    finally:
        for node in nodes:
            with contextlib.suppress(NotFoundError):
                kube.delete(RESOURCE_SLICE, f"{node}-gpus")
            with contextlib.suppress(NotFoundError):
                kube.delete(NODE, node)


@pytest.fixture
def gpu_class(kube: KubeClient, unique: str) -> Iterator[str]:
    name = f"cq-gpu-{unique}"
    cel = (
        'device.driver == "gpu.deckhouse.io" && '
        'device.attributes["gpu.deckhouse.io"].deviceType == "Physical"'
    )
    kube.create(DEVICE_CLASS, device_class(name, cel=cel))
    try:
        yield name
    finally:
        with contextlib.suppress(NotFoundError):
            kube.delete(DEVICE_CLASS, name)


def job_pod(name: str, template: str) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name),
        spec=V1PodSpec(
            containers=[V1Container(name="app", image="app", resources={"claims": [{"name": "imex"}]})],
            resource_claims=[V1PodResourceClaim(name="imex", resource_claim_template_name=template)],
        ),
    )


def claim_devices(kube: KubeClient, namespace: str, pod: str) -> dict[str, tuple[str, str]]:
    """request -> (pool, device) of the allocated claim the Pod owns."""
    claims, _ = kube.list(RESOURCE_CLAIM, namespace=namespace)
    for claim in claims:
        owners = [o.name for o in meta(claim).owner_references or []]
        allocation = claim.status.allocation if claim.status else None
        if pod in owners and allocation is not None and allocation.devices is not None:
            return {r.request: (r.pool, r.device) for r in allocation.devices.results or []}
    return {}


def test_the_domains_pods_land_in_one_clique(
    kube: KubeClient,
    control_plane: ControlPlane,
    kubeconfig: str,
    namespace: str,
    racks: dict[str, str],
    gpu_class: str,
    tmp_path: Path,
) -> None:
    with gpu_controller(kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log"):
        body: dict[str, Any] = {
            "metadata": {"name": "training", "namespace": namespace},
            "spec": {
                "channel": {"resourceClaimTemplate": {"name": "training-imex"}},
                "devices": {"deviceClassName": gpu_class, "count": 1},
            },
        }
        kube.create(COMPUTE_DOMAIN, ComputeDomain.from_api_dict(body))
        status = eventually(
            lambda: (
                s if (s := kube.get(COMPUTE_DOMAIN, "training", namespace).status) and s.channel else None
            ),
            what="the domain's channel and clique",
        )
        clique = status.nvlink_domain
        assert clique in (CLIQUE_A, CLIQUE_B)
        eventually(lambda: _template(kube, namespace), what="the claim template")
        for i in range(PODS):
            kube.create(POD, job_pod(f"worker-{i}", "training-imex"), namespace)

        def scheduled() -> dict[str, str]:
            pods, _ = kube.list(POD, namespace=namespace)
            return {str(meta(p).name): str(spec_of(p).node_name) for p in pods if spec_of(p).node_name}

        eventually(lambda: len(scheduled()) == 2, what="two Pods scheduled")
        time.sleep(3)  # the scheduler keeps retrying the other two; give it room to misplace them
        placed = scheduled()
        assert len(placed) == 2, placed
        in_clique = {node for node, c in racks.items() if c == clique}
        assert set(placed.values()) == in_clique
        for pod in placed:
            devices = claim_devices(kube, namespace, pod)
            node = placed[pod]
            assert devices["channel"] == (f"gpus/{node}", f"imex-channel-{status.channel}")
            assert devices["gpus"] == (f"gpus/{node}", "gpu-0")  # same pool: the clique's GPU
        pending = {f"worker-{i}" for i in range(PODS)} - set(placed)
        for name in pending:
            assert spec_of(kube.get(POD, name, namespace)).node_name is None
        # Clean up while the controller runs: the domain's finalizer waits for its claims, which go
        # with their Pods (no kubelet here, so the bound ones are removed at once).
        control_plane.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force")
        kube.delete(COMPUTE_DOMAIN, "training", namespace)
        eventually(lambda: not _exists(kube, namespace, "training"), what="the domain deleted")


def _exists(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        kube.get(COMPUTE_DOMAIN, name, namespace)
    except NotFoundError:
        return False
    return True


def _template(kube: KubeClient, namespace: str) -> bool:
    try:
        kube.get(RESOURCE_CLAIM_TEMPLATE, "training-imex", namespace)
    except NotFoundError:
        return False
    return True
