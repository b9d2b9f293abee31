"""gpu-controller as a process against the real control plane.

Proves the framework end to end: informers, the controller with its Node watch, the reconciler's
status write (observedGeneration, conditions) against the CRD's status subresource, events, leader
election and the metrics endpoint.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from kubernetes.client import V1ObjectMeta
from testutil.integration.dra_objects import create_ready_node
from testutil.integration.process_helpers import eventually, running

from api.gpu.v1alpha1 import (
    LABEL_NODE,
    LABEL_VENDOR,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.devcluster.processes import free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import EVENT, LEASE, NODE


def _create_gpu(kube: KubeClient, name: str, node: str) -> PhysicalGPU:
    """Creates a PhysicalGPU as the node agent would: object first, then its status subresource."""
    labels = {LABEL_NODE: node, LABEL_VENDOR: "nvidia"}  # the agent labels each card with its vendor
    gpu = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels)))
    gpu.status = PhysicalGPUStatus(
        pci_info=PciInfo(
            address="0000:02:00.0",
            class_=PciClass(code="0302"),
            vendor=PciId(id="10de"),
            device=PciId(id="20b7"),
        )
    )
    return kube.update_status(PHYSICAL_GPU, gpu)


def _conditions(kube: KubeClient, name: str) -> dict[str, tuple[str, str]]:
    gpu = kube.get(PHYSICAL_GPU, name)
    return {c.type: (c.status, c.reason) for c in (gpu.status.conditions or [])} if gpu.status else {}


def test_gpu_controller_sets_pending_conditions_and_removes_orphans(
    kube: KubeClient, kubeconfig: str, unique: str, namespace: str, tmp_path: Path
) -> None:
    node = f"node-{unique}"
    create_ready_node(kube, node)
    kept, orphan_node = f"{node}-0-10de-20b7", f"gone-{unique}"
    create_ready_node(kube, orphan_node)
    _create_gpu(kube, kept, node)
    _create_gpu(kube, f"{orphan_node}-0-10de-20b7", orphan_node)
    port = free_port()
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{port}",
        f"--leader-election-namespace={namespace}",
        f"--leader-election-id=gpu-controller-{unique}",
    ]
    with running("pkg.app.gpu_controller", args, log_path=tmp_path / "gpu-controller.log"):
        pending = ("Unknown", "ValidationPending")
        eventually(
            lambda: _conditions(kube, kept) == {"DriverReady": pending, "HardwareHealthy": pending},
            what="both conditions Unknown/ValidationPending",
        )
        stored = kube.get(PHYSICAL_GPU, kept)
        assert stored.status is not None
        assert stored.status.observed_generation == stored.metadata.generation
        assert stored.status.pci_info is not None  # the node agent's fields survived our write

        lease = kube.get(LEASE, f"gpu-controller-{unique}", namespace)
        assert lease.spec is not None
        assert lease.spec.holder_identity

        kube.delete(NODE, orphan_node)

        def orphan_gone() -> bool:
            try:
                kube.get(PHYSICAL_GPU, f"{orphan_node}-0-10de-20b7")
            except NotFoundError:
                return True
            return False

        eventually(orphan_gone, what="the PhysicalGPU of a deleted Node to be deleted")
        assert kube.get(PHYSICAL_GPU, kept).metadata.uid == stored.metadata.uid

        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "gpu_physicalgpu_info{" in metrics
        assert f'name="{kept}"' in metrics
        assert "gpu_reconcile_total" in metrics
        ready = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.status == 200

    # A clean stop releases the lease at once.
    released = kube.get(LEASE, f"gpu-controller-{unique}", namespace)
    assert not (released.spec and released.spec.holder_identity)
    events, _ = kube.list(EVENT, namespace="default")
    assert any(
        e.reason == "NodeGone" and e.regarding and e.regarding.name == f"{orphan_node}-0-10de-20b7"
        for e in events
    )
    kube.delete(PHYSICAL_GPU, kept)
    kube.delete(NODE, node)
