"""DRA is live in the test control plane: the real scheduler allocates from our slices.

A Pod asks for an extended resource backed by a DeviceClass (KEP-5004); the scheduler creates the
special ResourceClaim, allocates a MIG offer from a partitionable pool (KEP-4815, in the layout the
server's version wants: a counter slice of its own on 1.35+, counters inline on 1.34) and binds the
Pod. If any feature gate or the layout were wrong, the Pod would stay pending.
"""

from __future__ import annotations

import time

import pytest
from kubernetes.client import (
    V1Container,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1ResourceRequirements,
)
from testutil.integration.dra_objects import DRIVER, a30_mig_pool, create_ready_node, device_class
from testutil.k8s_fields import allocation_results, meta, name_of

from pkg.dra.model.slices import read_server_version
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

pytestmark = pytest.mark.dra_api

MIG_SELECTOR = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].deviceType == "MIG"'


def _wait_bound(kube: KubeClient, namespace: str, name: str, timeout: float = 60.0) -> V1Pod:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = kube.get(POD, name, namespace)
        if pod.spec is not None and pod.spec.node_name:
            return pod
        time.sleep(0.3)
    raise AssertionError(f"pod {namespace}/{name} was not bound: {pod.status}")


def test_scheduler_allocates_mig_offer_for_extended_resource(
    kube: KubeClient, namespace: str, unique: str
) -> None:
    node = f"gpu-node-{unique}"
    resource = f"{DRIVER}/mig-1g-{unique}"
    create_ready_node(kube, node)
    pool = a30_mig_pool(node, layout=read_server_version(kube).layout)
    for rs in pool:
        kube.create(RESOURCE_SLICE, rs)
    mig_class = device_class(f"mig-1g-{unique}", cel=MIG_SELECTOR, extended_resource_name=resource)
    kube.create(DEVICE_CLASS, mig_class)
    try:
        pod = V1Pod(
            metadata=V1ObjectMeta(name="mig-user", namespace=namespace),
            spec=V1PodSpec(
                containers=[
                    V1Container(
                        name="main",
                        image="registry.k8s.io/pause:3.10",
                        resources=V1ResourceRequirements(limits={resource: "1"}, requests={resource: "1"}),
                    )
                ]
            ),
        )
        kube.create(POD, pod)
        bound = _wait_bound(kube, namespace, "mig-user")
        assert bound.spec is not None
        assert bound.spec.node_name == node

        claims, _ = kube.list(RESOURCE_CLAIM, namespace=namespace)
        assert len(claims) == 1, [name_of(c) for c in claims]
        claim = claims[0]
        annotations = meta(claim).annotations or {}
        assert annotations.get("resource.kubernetes.io/extended-resource-claim") == "true"
        results = allocation_results(claim)
        assert len(results) == 1
        assert results[0].driver == DRIVER
        assert results[0].pool == f"gpus/{node}"
        assert results[0].device.startswith("gpu-0000-02-00-0-mig-14-")
    finally:
        kube.delete(DEVICE_CLASS, f"mig-1g-{unique}")
        for rs in pool:
            kube.delete(RESOURCE_SLICE, name_of(rs))
        kube.delete(NODE, node)
