"""The writer service's requests: exact bodies, ownership-preserving verbs, counters, barriers."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1Node, V1ObjectMeta
from testutil.unit.nodeagent.nodeagent_fakes import gpu_object

from api.gpu.v1alpha1 import CurrentState, DriverType, PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import NODE
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.service import FIELD_MANAGER, CacheBarrier, KubeWriter


def _writes(kind: str, verb: str) -> float:
    return float(metrics.api_writes.labels(node="n1", kind=kind, verb=verb)._value.get())


@pytest.fixture
def client(mocker: Any) -> Any:
    client = mocker.Mock(spec=KubeClient)
    client.field_manager = FIELD_MANAGER
    return client


@pytest.fixture
def barriers() -> tuple[CacheBarrier, CacheBarrier]:
    return CacheBarrier(name="gpus"), CacheBarrier(name="node")


def _writer(client: Any, barriers: tuple[CacheBarrier, CacheBarrier]) -> KubeWriter:
    return KubeWriter(client, node_name="n1", gpu_barrier=barriers[0], node_barrier=barriers[1])


def _stored(name: str, rv: str) -> PhysicalGPU:
    return PhysicalGPU(metadata=V1ObjectMeta(name=name, uid=f"uid-{name}", resource_version=rv))


def test_the_field_manager_is_fixed(client: Any, barriers: Any) -> None:
    client.field_manager = "someone-else"
    with pytest.raises(ValueError, match="gpu-node-agent"):
        _writer(client, barriers)


def test_create_posts_name_and_labels_only(client: Any, barriers: Any) -> None:
    client.create.return_value = _stored("g", "5")
    before = _writes("PhysicalGPU", "create")
    _writer(client, barriers).create(name="g", labels={"a": "b"})
    kind, obj = client.create.call_args.args
    assert kind is PHYSICAL_GPU
    assert obj.to_api_dict() == {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "PhysicalGPU",
        "metadata": {"name": "g", "labels": {"a": "b"}},
        "spec": {},
    }
    assert _writes("PhysicalGPU", "create") == before + 1
    assert not barriers[0].wait(0.0)  # rv 5 is now expected


def test_label_patch_is_a_merge_patch_guarded_by_uid(client: Any, barriers: Any) -> None:
    client.patch.return_value = _stored("g", "6")
    _writer(client, barriers).patch_labels(gpu_object("g", "0000:3b:00.0", uid="u1"), {"x": "1", "y": None})
    args, kwargs = client.patch.call_args
    assert args == (PHYSICAL_GPU, "g", {"metadata": {"uid": "u1", "labels": {"x": "1", "y": None}}})
    assert kwargs == {"patch_type": PatchType.MERGE}


def test_status_is_applied_on_the_subresource_with_only_the_agents_fields(client: Any, barriers: Any) -> None:
    gpu = gpu_object("g", "0000:3b:00.0")
    client.apply.return_value = gpu  # the same resourceVersion: the server saw no change
    status = PhysicalGPUStatus(current_state=CurrentState(driver_type=DriverType.VFIO))
    before = _writes("PhysicalGPU", "apply")
    _writer(client, barriers).apply_status(gpu, status)
    args, kwargs = client.apply.call_args
    assert args == (
        PHYSICAL_GPU,
        {"metadata": {"name": "g"}, "status": {"currentState": {"driverType": "VFIO"}}},
    )
    assert kwargs == {"subresource": "status", "force": True}
    assert _writes("PhysicalGPU", "apply") == before + 1
    assert barriers[0].wait(0.0)  # a no-op apply produces no event to wait for


def test_stale_vendor_state_is_removed_by_a_json_patch_tested_on_uid(client: Any, barriers: Any) -> None:
    client.patch.return_value = _stored("g", "7")
    _writer(client, barriers).remove_current_state(gpu_object("g", "0000:3b:00.0", uid="u1"), ["nvidia"])
    args, kwargs = client.patch.call_args
    assert args[2] == [
        {"op": "test", "path": "/metadata/uid", "value": "u1"},
        {"op": "remove", "path": "/status/currentState/nvidia"},
    ]
    assert kwargs == {"patch_type": PatchType.JSON, "subresource": "status"}


def test_delete_carries_the_uid_and_tolerates_gone_objects(client: Any, barriers: Any) -> None:
    writer = _writer(client, barriers)
    assert writer.delete(gpu_object("g", "0000:3b:00.0", uid="u1"))
    client.delete.assert_called_once_with(PHYSICAL_GPU, "g", uid="u1")
    client.delete.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")
    assert not writer.delete(gpu_object("g", "0000:3b:00.0", uid="u1"))


def test_node_labels_are_a_merge_patch_of_the_given_keys(client: Any, barriers: Any) -> None:
    client.patch.return_value = V1Node(metadata=V1ObjectMeta(name="n1", resource_version="9"))
    before = _writes("Node", "patch")
    writer = _writer(client, barriers)
    writer.patch_node_labels("n1", {"gpu.deckhouse.io/os.id": None})
    client.patch.assert_called_once_with(
        NODE, "n1", {"metadata": {"labels": {"gpu.deckhouse.io/os.id": None}}}, patch_type=PatchType.MERGE
    )
    assert _writes("Node", "patch") == before + 1
    barriers[1].on_update(None, V1Node(metadata=V1ObjectMeta(name="n1", resource_version="9")))
    assert writer.wait_for_cache(0.0)
