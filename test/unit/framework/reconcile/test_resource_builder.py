"""ResourceBuilder: controllerutil's owner-reference and finalizer rules, and metadata that names
only what it was given."""

from __future__ import annotations

import pytest
from kubernetes.client import V1ConfigMap, V1Node, V1ObjectMeta, V1OwnerReference

from pkg.framework.client.builtin_kinds import CONFIG_MAP, DAEMON_SET, NODE, RESOURCE_SLICE
from pkg.framework.reconcile.owner_references import (
    AlreadyOwnedError,
    OwnerReferenceError,
    controller_of,
    controller_reference,
    reference_to,
)
from pkg.framework.reconcile.resource_builder import ResourceBuilder


def config_map(name: str = "cfg", namespace: str | None = "ns", uid: str | None = "u-cfg") -> V1ConfigMap:
    return V1ConfigMap(metadata=V1ObjectMeta(name=name, namespace=namespace, uid=uid))


def node(name: str = "n1", uid: str | None = "u-n1") -> V1Node:
    return V1Node(metadata=V1ObjectMeta(name=name, uid=uid))


def test_a_controller_reference_blocks_owner_deletion_unless_told_not_to() -> None:
    assert controller_reference(config_map(), CONFIG_MAP) == V1OwnerReference(
        api_version="v1",
        kind="ConfigMap",
        name="cfg",
        uid="u-cfg",
        controller=True,
        block_owner_deletion=True,
    )
    plain = controller_reference(node(), NODE, block_owner_deletion=False)
    assert (plain.controller, plain.block_owner_deletion) == (True, None)
    assert "block_owner_deletion" not in plain.model_fields_set  # omitted, not false
    other = reference_to(node(), NODE)
    assert (other.controller, other.block_owner_deletion) == (None, None)


@pytest.mark.parametrize("owner", [config_map(uid=None), config_map(name=""), V1ConfigMap()])
def test_an_owner_not_read_from_the_api_cannot_own(owner: V1ConfigMap) -> None:
    with pytest.raises(OwnerReferenceError, match=r"ConfigMap .*no name or uid"):
        ResourceBuilder("ds", namespace="ns").controlled_by(owner, CONFIG_MAP)


def test_a_new_object_carries_exactly_what_it_was_given() -> None:
    meta = (
        ResourceBuilder("ds", namespace="ns")
        .labels({"a": "1", "gone": None})
        .annotations({"note": "x"})
        .controlled_by(config_map(), CONFIG_MAP)
        .add_finalizer("f")
        .meta()
    )
    assert meta == V1ObjectMeta(
        name="ds",
        namespace="ns",
        labels={"a": "1"},
        annotations={"note": "x"},
        owner_references=[controller_reference(config_map(), CONFIG_MAP)],
        finalizers=["f"],
    )
    assert ResourceBuilder("x").meta().model_fields_set == {"name"}
    assert ResourceBuilder("x").labels({}).meta().labels == {}  # given, even empty, is written


def test_an_owner_in_another_namespace_is_refused_naming_both() -> None:
    with pytest.raises(
        OwnerReferenceError, match=r"cross-namespace.*ConfigMap other/cfg cannot own DaemonSet ns/ds"
    ):
        ResourceBuilder("ds", namespace="ns", kind=DAEMON_SET).controlled_by(
            config_map(namespace="other"), CONFIG_MAP
        )
    with pytest.raises(OwnerReferenceError, match=r"cluster-scoped ResourceSlice s1 .*ConfigMap ns/cfg"):
        ResourceBuilder("s1", kind=RESOURCE_SLICE).owned_by(config_map(), CONFIG_MAP)
    # a cluster-scoped owner may own a namespaced object, and one of the same namespace may too
    ResourceBuilder("ds", namespace="ns").owned_by(node(), NODE).controlled_by(config_map(), CONFIG_MAP)


def test_a_second_controller_is_refused_naming_both() -> None:
    builder = ResourceBuilder("ds", namespace="ns", kind=DAEMON_SET).controlled_by(config_map(), CONFIG_MAP)
    with pytest.raises(
        AlreadyOwnedError, match="DaemonSet ns/ds is already controlled by ConfigMap cfg: ConfigMap b"
    ):
        builder.controlled_by(config_map(name="b", uid="u-b"), CONFIG_MAP)
    with pytest.raises(AlreadyOwnedError):  # also when the controller comes with the object read
        ResourceBuilder.of(builder.meta()).controlled_by(config_map(name="b", uid="u-b"), CONFIG_MAP)
    # an owner that does not control is fine beside the controller
    assert (
        len(builder.owned_by(config_map(name="b", uid="u-b"), CONFIG_MAP).meta().owner_references or []) == 2
    )


def test_the_same_owner_is_replaced_not_added_again() -> None:
    builder = ResourceBuilder("ds", namespace="ns").owned_by(config_map(), CONFIG_MAP)
    refs = builder.controlled_by(config_map(uid="u-new"), CONFIG_MAP).meta().owner_references
    assert refs == [controller_reference(config_map(uid="u-new"), CONFIG_MAP)]
    assert controller_of(builder.meta()) == refs[0]
    assert controller_of(V1ObjectMeta(name="x")) is None


def test_finalizers_are_added_and_removed_idempotently_in_order() -> None:
    meta = V1ObjectMeta(name="c", finalizers=["theirs"])
    builder = ResourceBuilder.of(meta).add_finalizer("ours").add_finalizer("ours")
    assert builder.meta().finalizers == ["theirs", "ours"]
    assert builder.remove_finalizer("ours").remove_finalizer("ours").meta().finalizers == ["theirs"]
    assert ResourceBuilder("x").remove_finalizer("absent").meta().finalizers == []


def test_editing_a_cached_object_changes_a_copy_and_only_what_was_touched() -> None:
    cached = V1ObjectMeta(
        name="c",
        namespace="ns",
        uid="u",
        resource_version="7",
        labels={"keep": "1"},
        annotations={"mark": "x", "a": "b"},
    )
    edited = ResourceBuilder.of(cached).annotations({"mark": None, "new": "y"}).meta()
    assert edited.annotations == {"a": "b", "new": "y"}
    assert (edited.name, edited.uid, edited.resource_version, edited.labels) == ("c", "u", "7", {"keep": "1"})
    assert cached.annotations == {"mark": "x", "a": "b"}  # the cache's copy is untouched


def test_a_merge_patch_names_only_the_given_keys_and_removes_with_null() -> None:
    assert ResourceBuilder().labels({"set": "1", "drop": None}).merge_patch() == {
        "metadata": {"labels": {"set": "1", "drop": None}}
    }
    patch = ResourceBuilder(uid="u1", resource_version="9").annotations({"a": "b"}).merge_patch()
    assert patch == {"metadata": {"uid": "u1", "resourceVersion": "9", "annotations": {"a": "b"}}}
    owned = ResourceBuilder("s").controlled_by(node(), NODE, block_owner_deletion=False).merge_patch()
    assert owned["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-n1", "controller": True}
    ]
