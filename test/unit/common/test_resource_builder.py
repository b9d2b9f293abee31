"""ResourceBuilder: idempotent metadata edits and consistent owner references."""

from __future__ import annotations

import pytest
from kubernetes.client import V1ObjectMeta, V1OwnerReference
from pydantic import BaseModel

from pkg.client.kinds import ResourceKind
from pkg.common.resource_builder import (
    OwnershipConflictError,
    add_finalizer,
    has_finalizer,
    new_metadata,
    owner_reference,
    remove_annotations,
    remove_finalizer,
    remove_labels,
    set_annotations,
    set_labels,
    set_owner_reference,
)


class Dummy(BaseModel):
    pass


KIND = ResourceKind(
    group="gpu.deckhouse.io",
    version="v1alpha1",
    kind="PhysicalGPU",
    plural="physicalgpus",
    namespaced=False,
    model=Dummy,
)
OWNER = V1ObjectMeta(name="gpu-a", uid="uid-a")


def test_owner_reference_is_a_blocking_controller_reference_by_default() -> None:
    ref = owner_reference(KIND, OWNER)
    assert ref == V1OwnerReference(
        api_version="gpu.deckhouse.io/v1alpha1",
        kind="PhysicalGPU",
        name="gpu-a",
        uid="uid-a",
        controller=True,
        block_owner_deletion=True,
    )
    assert owner_reference(KIND, OWNER, controller=False).controller is False


def test_owner_reference_needs_name_and_uid() -> None:
    with pytest.raises(ValueError, match="uid"):
        owner_reference(KIND, V1ObjectMeta(name="gpu-a"))


def test_set_owner_reference_is_idempotent_and_replaces_by_uid() -> None:
    meta = V1ObjectMeta(name="child")
    ref = owner_reference(KIND, OWNER)
    assert set_owner_reference(meta, ref) is True
    assert set_owner_reference(meta, ref) is False
    weaker = owner_reference(KIND, OWNER, block_owner_deletion=False)
    assert set_owner_reference(meta, weaker) is True
    assert meta.owner_references == [weaker]


def test_a_second_controller_owner_is_refused() -> None:
    meta = new_metadata(name="child", owner=owner_reference(KIND, OWNER))
    other = owner_reference(KIND, V1ObjectMeta(name="gpu-b", uid="uid-b"))
    with pytest.raises(OwnershipConflictError, match="gpu-a"):
        set_owner_reference(meta, other)
    assert (
        set_owner_reference(
            meta, owner_reference(KIND, V1ObjectMeta(name="gpu-b", uid="uid-b"), controller=False)
        )
        is True
    )


def test_new_metadata_leaves_out_empty_collections_and_dedupes_finalizers() -> None:
    meta = new_metadata(name="x", namespace="", labels={}, finalizers=["f", "f"])
    assert meta.namespace is None
    assert meta.labels is None
    assert meta.annotations is None
    assert meta.finalizers == ["f"]


def test_finalizers_add_and_remove_idempotently() -> None:
    meta = V1ObjectMeta(name="x")
    assert add_finalizer(meta, "gpu.deckhouse.io/f") is True
    assert add_finalizer(meta, "gpu.deckhouse.io/f") is False
    assert has_finalizer(meta, "gpu.deckhouse.io/f")
    assert remove_finalizer(meta, "gpu.deckhouse.io/f") is True
    assert remove_finalizer(meta, "gpu.deckhouse.io/f") is False
    assert meta.finalizers is None


def test_labels_and_annotations_set_merge_and_remove_to_none() -> None:
    meta = V1ObjectMeta(name="x", labels={"keep": "1"})
    assert set_labels(meta, {"gpu.deckhouse.io/node": "n1"}) is True
    assert set_labels(meta, {"gpu.deckhouse.io/node": "n1"}) is False
    assert meta.labels == {"keep": "1", "gpu.deckhouse.io/node": "n1"}
    assert remove_labels(meta, "keep", "gpu.deckhouse.io/node", "absent") is True
    assert remove_labels(meta, "keep") is False
    assert meta.labels is None
    assert set_annotations(meta, {"a": "1"}) is True
    assert set_annotations(meta, {}) is False
    assert remove_annotations(meta, "a") is True
    assert meta.annotations is None
