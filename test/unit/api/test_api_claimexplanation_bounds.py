"""Every list and string of a ClaimExplanation's status is bounded in the committed CRD, so the API
server can cost its schema and a verdict about thousands of holders cannot grow an object without
limit (the writer clips to the same bounds: test/unit/dra/explain/test_explain_verdict.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

CRD = Path(__file__).resolve().parents[3] / "config" / "crd" / "gpu.deckhouse.io_claimexplanations.yaml"


def unbounded(schema: dict[str, Any], path: str) -> Iterator[str]:
    """The paths under ``schema`` of a string without maxLength, an array without maxItems, or a
    map without maxProperties."""
    kind = schema.get("type")
    if kind == "string" and "maxLength" not in schema and "format" not in schema and "enum" not in schema:
        yield path
    if kind == "array":
        if "maxItems" not in schema:
            yield path
        yield from unbounded(schema["items"], f"{path}[]")
    if kind == "object":
        for name, sub in schema.get("properties", {}).items():
            yield from unbounded(sub, f"{path}.{name}")
        if isinstance(schema.get("additionalProperties"), dict):
            if "maxProperties" not in schema:
                yield path
            yield from unbounded(schema["additionalProperties"], f"{path}{{}}")


def status_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    [version] = crd["spec"]["versions"]
    status: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return status


def test_every_list_and_string_of_the_causes_is_bounded() -> None:
    assert list(unbounded(status_schema()["properties"]["causes"], "status.causes")) == []


def test_the_walk_finds_an_unbounded_list() -> None:
    schema = {"type": "object", "properties": {"holders": {"type": "array", "items": {"type": "string"}}}}
    assert list(unbounded(schema, "facts")) == ["facts.holders", "facts.holders[]"]
