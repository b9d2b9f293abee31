"""The framework's ready-made transforms (raw and decoded)."""

from __future__ import annotations

from pkg.framework.cache.transforms import FieldSetSharer, strip_managed_fields
from pkg.framework.client.builtin_kinds import NODE


def test_strip_managed_fields_keeps_everything_else() -> None:
    raw = {
        "metadata": {"name": "a", "labels": {"x": "1"}, "managedFields": [{"manager": "m"}]},
        "status": {"s": 1},
    }
    assert strip_managed_fields(raw) == {"metadata": {"name": "a", "labels": {"x": "1"}}, "status": {"s": 1}}
    assert strip_managed_fields({"kind": "NoMetadata"}) == {"kind": "NoMetadata"}


def test_field_set_sharer_shares_the_sets_of_one_shape_and_copies_get_their_own() -> None:
    sharer = FieldSetSharer()
    first, second = (
        sharer(NODE.decode({"metadata": {"name": name, "labels": {"x": "1"}}})) for name in ("a", "b")
    )
    assert first.metadata is not None
    assert second.metadata is not None
    assert first.metadata.__pydantic_fields_set__ is second.metadata.__pydantic_fields_set__
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    assert len(sharer) == 2  # the Node's shape and its metadata's
    copy = first.model_copy(deep=True)  # what a reconcile edits
    assert copy.metadata is not None
    copy.metadata.annotations = {"a": "b"}
    assert "annotations" not in second.metadata.__pydantic_fields_set__
    assert NODE.encode(second) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "b", "labels": {"x": "1"}},
    }
