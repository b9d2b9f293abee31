"""The framework's ready-made raw transforms."""

from __future__ import annotations

from pkg.framework.cache.transforms import strip_managed_fields


def test_strip_managed_fields_keeps_everything_else() -> None:
    raw = {
        "metadata": {"name": "a", "labels": {"x": "1"}, "managedFields": [{"manager": "m"}]},
        "status": {"s": 1},
    }
    assert strip_managed_fields(raw) == {"metadata": {"name": "a", "labels": {"x": "1"}}, "status": {"s": 1}}
    assert strip_managed_fields({"kind": "NoMetadata"}) == {"kind": "NoMetadata"}
