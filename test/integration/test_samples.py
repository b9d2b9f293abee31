"""The shipped samples work against the real API server and scheduler, as a user would apply them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from testutil.integration.dra_objects import a30_mig_pool, create_ready_node
from testutil.k8s_fields import allocation_results, name_of

from pkg.devcluster.cluster import ControlPlane
from pkg.dra.model.slices import read_server_version
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

pytestmark = pytest.mark.dra_api

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"


def test_sample_device_classes_are_accepted_and_schedule_a_mig_pod(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, unique: str
) -> None:
    classes = [d for d in yaml.safe_load_all((SAMPLES / "deviceclasses.yaml").read_text()) if d]
    assert {c["metadata"]["name"] for c in classes} >= {"gpu-mig-1g", "gpu-physical", "gpu-timeslicing"}
    control_plane.kubectl("apply", "-f", str(SAMPLES / "deviceclasses.yaml"))
    node = f"sample-node-{unique}"
    create_ready_node(kube, node)
    pool = a30_mig_pool(node, layout=read_server_version(kube).layout)
    for rs in pool:
        kube.create(RESOURCE_SLICE, rs)
    try:
        control_plane.kubectl("apply", "-n", namespace, "-f", str(SAMPLES / "pod-mig-1g.yaml"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            spec = kube.get(POD, "mig-1g-demo", namespace).spec
            if spec is not None and spec.node_name:
                break
            time.sleep(0.3)
        assert spec is not None
        assert spec.node_name == node
        claims, _ = kube.list(RESOURCE_CLAIM, namespace=namespace)
        results = allocation_results(claims[0])
        assert [r.device.rsplit("-", 2)[0] for r in results] == ["gpu-0000-02-00-0-mig"]
    finally:
        kube.delete(POD, "mig-1g-demo", namespace)
        for cls in classes:
            kube.delete(DEVICE_CLASS, cls["metadata"]["name"])
        for rs in pool:
            kube.delete(RESOURCE_SLICE, name_of(rs))
        kube.delete(NODE, node)
