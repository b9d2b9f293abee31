"""Resource wrapper: which requests an update makes, in what order, from which resourceVersion."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta
from pydantic import BaseModel, ConfigDict, Field

from pkg.framework.client.errors import ConflictError, InvalidError, NotFoundError
from pkg.framework.client.patch import PatchOp
from pkg.framework.reconcile import ConflictRequeue, KubeResourceWriter, Resource
from pkg.framework.reconcile.contract import Request

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class GPUStatus(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    conditions: list[V1Condition] | None = None
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    phase: str | None = None


class GPU(BaseModel):
    metadata: V1ObjectMeta
    spec: dict[str, str] = Field(default_factory=dict)
    status: GPUStatus | None = None


def gpu(*, rv: str = "10", generation: int = 2, observed: int | None = 2, **meta: Any) -> GPU:
    status = GPUStatus(observed_generation=observed, phase="Ready") if observed is not None else None
    return GPU(
        metadata=V1ObjectMeta(name="gpu-a", resource_version=rv, generation=generation, **meta),
        status=status,
    )


def bump(obj: GPU) -> GPU:
    """What the server does on a write: store it under a new resourceVersion."""
    stored = obj.model_copy(deep=True)
    stored.metadata.resource_version = str(int(obj.metadata.resource_version or "0") + 1)
    return stored


@pytest.fixture
def writer(mocker: Any) -> Any:
    mock = mocker.Mock(spec=["update_status", "patch_metadata"])
    mock.update_status.side_effect = bump
    return mock


def make(obj: GPU | None, writer: Any) -> Resource[GPU, GPUStatus]:
    resource = Resource(Request("gpu-a"), getter=lambda _r: obj, writer=writer, status_type=GPUStatus)
    resource.fetch()
    return resource


def patched_from(obj: GPU, writer: Any) -> None:
    """Makes patch_metadata return the working copy as stored, as the server would."""
    writer.patch_metadata.side_effect = lambda **_kw: bump(obj)


def test_fetch_copies_so_the_cached_object_is_never_mutated(writer: Any) -> None:
    cached = gpu()
    resource = make(cached, writer)
    resource.changed().metadata.labels = {"a": "b"}
    resource.status().phase = "Failed"
    assert cached.metadata.labels is None
    assert cached.status is not None
    assert cached.status.phase == "Ready"
    assert resource.original.metadata.labels is None


@pytest.mark.parametrize("getter_result", [None, NotFoundError(status=404, reason="NotFound", message="x")])
def test_missing_object_is_empty(getter_result: Any, writer: Any) -> None:
    def getter(_request: Request) -> GPU | None:
        if isinstance(getter_result, Exception):
            raise getter_result
        return None

    resource = Resource(Request("gpu-a"), getter=getter, writer=writer, status_type=GPUStatus)
    assert resource.fetch() is None
    assert resource.is_empty()
    with pytest.raises(LookupError):
        resource.changed()


def test_status_type_must_have_observed_generation(writer: Any) -> None:
    class Bare(BaseModel):
        phase: str = ""

    with pytest.raises(TypeError, match="observed_generation"):
        Resource(Request("x"), getter=lambda _r: None, writer=writer, status_type=Bare)


def test_nothing_changed_makes_no_call(writer: Any) -> None:
    resource = make(gpu(), writer)
    resource.update()
    assert writer.mock_calls == []


def test_status_only_change_is_one_status_write_from_the_fetched_version(writer: Any) -> None:
    resource = make(gpu(generation=3, observed=3), writer)
    resource.status().conditions = [
        V1Condition(type="Ready", status="False", reason="NoDriver", message="", last_transition_time=T0)
    ]
    resource.update()
    writer.patch_metadata.assert_not_called()
    writer.update_status.assert_called_once()
    body = writer.update_status.call_args.args[0]
    assert body.metadata.resource_version == "10"
    assert body.status.observed_generation == 3
    assert body.status.conditions[0].reason == "NoDriver"
    assert resource.original.metadata.resource_version == "11"


def test_stale_observed_generation_alone_is_written(writer: Any) -> None:
    resource = make(gpu(generation=5, observed=4), writer)
    resource.update()
    writer.update_status.assert_called_once()
    assert writer.update_status.call_args.args[0].status.observed_generation == 5


def test_missing_status_is_created_with_observed_generation(writer: Any) -> None:
    resource = make(gpu(generation=1, observed=None), writer)
    resource.update()
    assert writer.update_status.call_args.args[0].status == GPUStatus(observed_generation=1)


def test_handlers_cannot_fake_observed_generation(writer: Any) -> None:
    resource = make(gpu(generation=7, observed=6), writer)
    resource.status().observed_generation = 99
    resource.update()
    assert writer.update_status.call_args.args[0].status.observed_generation == 7


def test_metadata_only_change_is_one_guarded_json_patch(writer: Any) -> None:
    resource = make(gpu(labels={"keep": "1", "drop": "x"}), writer)
    changed = resource.changed()
    changed.metadata.labels = {"keep": "1", "gpu.deckhouse.io/node": "n1"}
    changed.metadata.finalizers = ["gpu.deckhouse.io/cleanup"]
    patched_from(changed, writer)
    resource.update()
    writer.update_status.assert_not_called()
    writer.patch_metadata.assert_called_once_with(
        name="gpu-a",
        namespace=None,
        ops=[
            {"op": "test", "path": "/metadata/resourceVersion", "value": "10"},
            {"op": "add", "path": "/metadata/finalizers", "value": ["gpu.deckhouse.io/cleanup"]},
            {"op": "remove", "path": "/metadata/labels/drop"},
            {"op": "add", "path": "/metadata/labels/gpu.deckhouse.io~1node", "value": "n1"},
        ],
    )
    assert resource.original.metadata.finalizers == ["gpu.deckhouse.io/cleanup"]


def test_both_changes_patch_metadata_first_then_put_status_from_the_patched_version(writer: Any) -> None:
    resource = make(gpu(generation=2, observed=2), writer)
    changed = resource.changed()
    changed.metadata.annotations = {"a/b~c": "v"}
    resource.status().phase = "Failed"
    patched_from(changed, writer)
    resource.update()
    assert [call[0] for call in writer.mock_calls] == ["patch_metadata", "update_status"]
    ops = writer.patch_metadata.call_args.kwargs["ops"]
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "10"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a/b~c": "v"}},
    ]
    body = writer.update_status.call_args.args[0]
    assert body.metadata.resource_version == "11"
    assert body.metadata.annotations == {"a/b~c": "v"}
    assert body.status.phase == "Failed"
    assert resource.original.metadata.resource_version == "12"


def test_second_update_after_a_write_is_a_no_op(writer: Any) -> None:
    resource = make(gpu(), writer)
    resource.status().phase = "Failed"
    resource.update()
    resource.update()
    assert writer.update_status.call_count == 1


@pytest.mark.parametrize("failing", ["patch_metadata", "update_status"])
def test_conflict_becomes_conflict_requeue(failing: str, writer: Any) -> None:
    resource = make(gpu(), writer)
    resource.changed().metadata.labels = {"a": "b"}
    resource.status().phase = "Failed"
    patched_from(resource.changed(), writer)
    getattr(writer, failing).side_effect = ConflictError(status=409, reason="Conflict", message="stale")
    with pytest.raises(ConflictRequeue) as raised:
        resource.update()
    assert raised.value.write == ("metadata" if failing == "patch_metadata" else "status")
    assert raised.value.key == "gpu-a"


def test_object_gone_during_write_ends_quietly(writer: Any) -> None:
    resource = make(gpu(), writer)
    resource.status().phase = "Failed"
    writer.update_status.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")
    resource.update()
    assert resource.is_empty()


def test_removing_the_last_finalizer_of_a_deleted_object_skips_the_status_write(writer: Any) -> None:
    resource = make(gpu(finalizers=["f"], deletion_timestamp=T0, observed=1), writer)
    resource.changed().metadata.finalizers = None
    patched_from(resource.changed(), writer)
    resource.update()
    writer.patch_metadata.assert_called_once()
    writer.update_status.assert_not_called()
    assert resource.is_empty()


@pytest.mark.parametrize(
    "message",
    [
        "testing value /metadata/resourceVersion failed: test failed",
        # What kube-apiserver 1.37 really answers: the generic message, no causes.
        "the server rejected our request due to an error in our request",
    ],
)
def test_kube_writer_turns_a_failed_resource_version_test_into_a_conflict(mocker: Any, message: str) -> None:
    client = mocker.Mock()
    client.patch.side_effect = InvalidError(status=422, reason="Invalid", message=message)
    writer = KubeResourceWriter(client, mocker.Mock(kind="PhysicalGPU"))
    with pytest.raises(ConflictError):
        writer.patch_metadata(name="gpu-a", namespace=None, ops=[])


def test_kube_writer_keeps_other_invalid_errors(mocker: Any) -> None:
    client = mocker.Mock()
    client.patch.side_effect = InvalidError(
        status=422,
        reason="Invalid",
        message="labels: invalid value",
        details={"causes": [{"field": "metadata.labels", "reason": "FieldValueInvalid"}]},
    )
    writer = KubeResourceWriter(client, mocker.Mock(kind="PhysicalGPU"))
    with pytest.raises(InvalidError):
        writer.patch_metadata(name="gpu-a", namespace="", ops=[])


def test_kube_writer_sends_a_json_patch_and_a_status_put(mocker: Any) -> None:
    from pkg.framework.client import PatchType

    client = mocker.Mock()
    kind = mocker.Mock(kind="PhysicalGPU")
    writer = KubeResourceWriter(client, kind)
    ops: list[PatchOp] = [{"op": "remove", "path": "/metadata/labels"}]
    assert writer.patch_metadata(name="gpu-a", namespace="", ops=ops) is client.patch.return_value
    client.patch.assert_called_once_with(kind, "gpu-a", ops, patch_type=PatchType.JSON, namespace=None)
    obj = gpu()
    assert writer.update_status(obj) is client.update_status.return_value
    client.update_status.assert_called_once_with(kind, obj)


def test_metadata_edits_outside_the_patched_fields_are_reported_not_written(
    writer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    resource = make(gpu(), writer)
    resource.changed().metadata.owner_references = []
    resource.update()
    assert writer.mock_calls == []
    assert "metadata changes not written: owner_references" in caplog.text
