"""JSON patch helpers: pointer escaping and minimal, applicable metadata operations."""

from __future__ import annotations

import pytest
from kubernetes.client import V1ObjectMeta

from pkg.framework.client.patch import escape_pointer, list_patch, map_patch, metadata_patch, test_op


@pytest.mark.parametrize(
    ("key", "token"),
    [
        ("plain", "plain"),
        ("gpu.deckhouse.io/node", "gpu.deckhouse.io~1node"),
        ("a~b", "a~0b"),
        # "~" is escaped before "/": otherwise "/" -> "~1" -> "~01" would be wrong.
        ("~/", "~0~1"),
    ],
)
def test_escape_pointer(key: str, token: str) -> None:
    assert escape_pointer(key) == token


def test_test_op_is_not_collected_by_pytest_and_builds_a_test() -> None:
    assert test_op("/metadata/resourceVersion", "7") == {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": "7",
    }
    assert test_op.__test__ is False  # type: ignore[attr-defined]


@pytest.mark.parametrize("empty", [None, {}])
def test_map_added_whole_when_absent(empty: dict[str, str] | None) -> None:
    assert map_patch("/metadata/labels", empty, {"a/b": "1"}) == [
        {"op": "add", "path": "/metadata/labels", "value": {"a/b": "1"}}
    ]


@pytest.mark.parametrize("empty", [None, {}])
def test_map_removed_whole_when_emptied(empty: dict[str, str] | None) -> None:
    assert map_patch("/metadata/labels", {"a": "1"}, empty) == [{"op": "remove", "path": "/metadata/labels"}]


def test_map_key_ops_are_escaped_and_minimal() -> None:
    ops = map_patch(
        "/metadata/annotations",
        {"keep": "1", "old/key": "x", "change": "a"},
        {"keep": "1", "new/key": "y", "change": "b"},
    )
    assert ops == [
        {"op": "remove", "path": "/metadata/annotations/old~1key"},
        {"op": "replace", "path": "/metadata/annotations/change", "value": "b"},
        {"op": "add", "path": "/metadata/annotations/new~1key", "value": "y"},
    ]


def test_equal_or_both_empty_maps_need_no_ops() -> None:
    assert map_patch("/p", {"a": "1"}, {"a": "1"}) == []
    assert map_patch("/p", None, {}) == []


def test_list_ops_cover_add_replace_remove_and_no_change() -> None:
    assert list_patch("/f", None, ["x"]) == [{"op": "add", "path": "/f", "value": ["x"]}]
    assert list_patch("/f", ["x"], ["x", "y"]) == [{"op": "replace", "path": "/f", "value": ["x", "y"]}]
    assert list_patch("/f", ["x"], []) == [{"op": "remove", "path": "/f"}]
    assert list_patch("/f", [], None) == []


def test_metadata_patch_covers_only_finalizers_labels_and_annotations() -> None:
    before = V1ObjectMeta(name="a", resource_version="1", labels={"x": "1"})
    after = V1ObjectMeta(
        name="renamed",
        resource_version="9",
        labels={"x": "2"},
        finalizers=["gpu.deckhouse.io/f"],
        annotations={"k": "v"},
    )
    assert metadata_patch(before, after) == [
        {"op": "add", "path": "/metadata/finalizers", "value": ["gpu.deckhouse.io/f"]},
        {"op": "replace", "path": "/metadata/labels/x", "value": "2"},
        {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
    ]
    assert metadata_patch(before, before.model_copy(deep=True)) == []
