"""The reconciler's Resource wrapper against the real server: one metadata JSON patch and one status
write, optimistic concurrency on both, and nobody else's fields overwritten."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.reconcile import ConflictRequeue, KubeResourceWriter, Resource
from pkg.framework.reconcile.conditions import ConditionStatus, DesiredCondition, set_condition
from pkg.framework.reconcile.contract import Request


def _resource(kube: KubeClient, name: str) -> Resource[PhysicalGPU, PhysicalGPUStatus]:
    resource = Resource(
        Request(name=name),
        getter=lambda r: kube.get(PHYSICAL_GPU, r.name),
        writer=KubeResourceWriter(kube, PHYSICAL_GPU),
        status_type=PhysicalGPUStatus,
    )
    assert resource.fetch() is not None
    return resource


@pytest.fixture
def gpu_name(kube: KubeClient, unique: str) -> Iterator[str]:
    name = f"res-{unique}"
    kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels={LABEL_NODE: "n1"})))
    yield name
    kube.delete(PHYSICAL_GPU, name)


def _pending(condition_type: str) -> DesiredCondition:
    return DesiredCondition(type=condition_type, status=ConditionStatus.UNKNOWN, reason="ValidationPending")


def test_status_and_metadata_written_with_observed_generation(kube: KubeClient, gpu_name: str) -> None:
    resource = _resource(kube, gpu_name)
    changed = resource.changed()
    changed.metadata.labels = {**(changed.metadata.labels or {}), "gpu.deckhouse.io/device": "a30-pcie"}
    changed.metadata.finalizers = ["gpu.deckhouse.io/cleanup"]
    conditions: list[V1Condition] = []
    set_condition(conditions, _pending("DriverReady"))
    resource.status().conditions = conditions
    resource.update()

    stored = kube.get(PHYSICAL_GPU, gpu_name)
    assert stored.metadata.labels == {LABEL_NODE: "n1", "gpu.deckhouse.io/device": "a30-pcie"}
    assert stored.metadata.finalizers == ["gpu.deckhouse.io/cleanup"]
    assert stored.status is not None
    assert stored.status.observed_generation == stored.metadata.generation
    assert [c.type for c in stored.status.conditions or []] == ["DriverReady"]

    # Nothing changed: no write at all (the resourceVersion stays).
    again = _resource(kube, gpu_name)
    again.update()
    assert kube.get(PHYSICAL_GPU, gpu_name).metadata.resource_version == stored.metadata.resource_version

    cleanup = _resource(kube, gpu_name)
    cleanup.changed().metadata.finalizers = None
    cleanup.update()
    assert not kube.get(PHYSICAL_GPU, gpu_name).metadata.finalizers


def test_concurrent_writer_causes_conflict_not_overwrite(kube: KubeClient, gpu_name: str) -> None:
    resource = _resource(kube, gpu_name)
    # Another writer (say, the validator) writes a condition after our read.
    kube.patch(
        PHYSICAL_GPU,
        gpu_name,
        {
            "status": {
                "conditions": [
                    {
                        "type": "HardwareHealthy",
                        "status": "True",
                        "reason": "Validated",
                        "message": "",
                        "lastTransitionTime": "2026-11-21T10:00:00Z",
                    }
                ]
            }
        },
        patch_type=PatchType.MERGE,
        subresource="status",
    )
    conditions: list[V1Condition] = []
    set_condition(conditions, _pending("DriverReady"))
    resource.status().conditions = conditions
    with pytest.raises(ConflictRequeue):
        resource.update()
    stored = kube.get(PHYSICAL_GPU, gpu_name)
    assert stored.status is not None
    assert [c.type for c in stored.status.conditions or []] == ["HardwareHealthy"]

    # The retry from a fresh read keeps the other writer's condition.
    retry = _resource(kube, gpu_name)
    merged = list(retry.status().conditions or [])
    set_condition(merged, _pending("DriverReady"))
    retry.status().conditions = merged
    retry.update()
    final = kube.get(PHYSICAL_GPU, gpu_name)
    assert final.status is not None
    assert sorted(c.type for c in final.status.conditions or []) == ["DriverReady", "HardwareHealthy"]


def test_stale_metadata_patch_conflicts(kube: KubeClient, gpu_name: str) -> None:
    resource = _resource(kube, gpu_name)
    kube.patch(
        PHYSICAL_GPU, gpu_name, {"metadata": {"annotations": {"other": "writer"}}}, patch_type=PatchType.MERGE
    )
    resource.changed().metadata.labels = {LABEL_NODE: "n2"}
    with pytest.raises(ConflictRequeue):
        resource.update()
    stored = kube.get(PHYSICAL_GPU, gpu_name)
    assert stored.metadata.labels == {LABEL_NODE: "n1"}
    assert stored.metadata.annotations == {"other": "writer"}
