"""api.crdgen: pydantic JSON schema -> Kubernetes structural schema, and the structural self-check."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from api.crdgen import CRDGenerationError, CRDNames, check_structural, render_crd, structural_schema
from api.gpu.v1alpha1 import ApiModel, Conditions, GPUClass, Int32, PhysicalGPU

_TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path, independent of the code under test."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from walk(node["items"], f"{path}[*]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    return dict(walk(schema))[path]


@pytest.mark.parametrize("model", [PhysicalGPU, GPUClass])
def test_generated_schema_is_structural(model: type[BaseModel]) -> None:
    schema = structural_schema(model)
    for path, node in walk(schema):
        assert node.get("type") in _TYPES, f"{path} has no valid type"
        assert not {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "const", "nullable"} & node.keys(), (
            path
        )
        assert not ("properties" in node and "additionalProperties" in node), path
        assert set(node.get("required", [])) <= set(node.get("properties", {})), path
        if node["type"] == "integer":
            assert node["format"] in ("int32", "int64"), path
        if path and path != ".metadata":
            assert node.get("description") or path.endswith("[*]") or "[*]." in path or path.endswith(".*"), (
                f"{path} has no description"
            )


def test_optional_fields_are_not_required_and_not_nullable() -> None:
    schema = structural_schema(PhysicalGPU)
    assert "required" not in at(schema, ".status")
    assert at(schema, ".status.capabilities")["required"] == ["vendor"]
    assert at(schema, ".status.capabilities.nvidia")["required"] == ["migSupported"]
    assert at(schema, ".status.nodeInfo.bareMetal") == {
        "type": "boolean",
        "description": at(schema, ".status.nodeInfo.bareMetal")["description"],
    }


def test_enums_formats_and_patterns_survive() -> None:
    schema = structural_schema(PhysicalGPU)
    assert at(schema, ".status.currentState.driverType")["enum"] == ["Nvidia", "VFIO", "ROCm", "Unknown"]
    assert at(schema, ".status.currentState.nvidia.mig.mode")["enum"] == [
        "Enabled",
        "Disabled",
        "NotAvailable",
        "Unknown",
    ]
    assert at(schema, ".status.capabilities.vendor")["enum"] == ["Nvidia", "Amd", "Intel"]
    assert at(schema, ".status.capabilities.memoryMiB")["format"] == "int64"
    assert at(schema, ".status.capabilities.nvidia.mig.profiles[*].profileID")["format"] == "int32"
    assert at(schema, ".status.observedGeneration") == {
        "type": "integer",
        "format": "int64",
        "minimum": 0,
        "description": "metadata.generation the controller last processed.",
    }
    assert at(schema, ".status.capabilities.nvidia.computeCap")["pattern"] == r"^\d+\.\d+$"
    assert "class" in at(schema, ".status.pciInfo")["properties"]


def test_conditions_use_the_standard_condition_schema_as_a_list_map() -> None:
    conditions = at(structural_schema(PhysicalGPU), ".status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert item["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    assert item["properties"]["type"]["maxLength"] == 316
    assert item["properties"]["reason"]["pattern"] == "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


def test_defaults_and_cel_rules_are_carried() -> None:
    schema = structural_schema(GPUClass)
    assert at(schema, ".spec.sharing.strategy")["default"] == "Exclusive"
    rules = [rule["rule"] for rule in at(schema, ".spec")["x-kubernetes-validations"]]
    assert any("deviceType == 'MIG'" in rule for rule in rules)
    pgpu = structural_schema(PhysicalGPU)
    assert at(pgpu, ".status.capabilities")["x-kubernetes-validations"][0]["rule"] == (
        "self.vendor == 'Nvidia' || !has(self.nvidia)"
    )


def test_empty_spec_and_metadata_render_as_plain_objects() -> None:
    crd = render_crd(PhysicalGPU, names=CRDNames(group="g.io", version="v1", kind="PhysicalGPU", plural="ps"))
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert root["properties"]["metadata"] == {"type": "object"}
    assert root["properties"]["spec"]["type"] == "object"
    assert "properties" not in root["properties"]["spec"]
    assert root["properties"]["kind"]["type"] == "string"
    assert "enum" not in root["properties"]["kind"]
    assert "required" not in root


class _Union(ApiModel):
    value: int | str = Field(description="either")


class _Free(ApiModel):
    value: Any = Field(description="anything")


class _Node(ApiModel):
    child: _Node | None = Field(default=None, description="recursive")


class _Bounds(ApiModel):
    positive: Int32 = Field(gt=0, description="exclusive bound")
    tags: set[str] = Field(description="a set")
    conditions: Conditions | None = Field(default=None, description="conditions")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_Union, r"\.value: anyOf with 2 non-null branches has no structural form"),
        (_Free, r"\.value: every node of a structural schema needs a type"),
        (_Node, r"\.child: recursive model _Node has no structural form"),
    ],
)
def test_models_without_structural_form_fail_with_the_field_path(
    model: type[BaseModel], message: str
) -> None:
    with pytest.raises(CRDGenerationError, match=message):
        structural_schema(model)


def test_json_schema_2020_keywords_are_translated() -> None:
    schema = structural_schema(_Bounds)
    assert at(schema, ".positive") == {
        "type": "integer",
        "format": "int32",
        "minimum": 0,
        "exclusiveMinimum": True,
        "description": "exclusive bound",
    }
    assert at(schema, ".tags")["x-kubernetes-list-type"] == "set"
    assert "uniqueItems" not in at(schema, ".tags")


def test_a_crd_needs_a_status_for_its_status_subresource() -> None:
    class NoStatus(ApiModel):
        spec: int = Field(description="spec")

    with pytest.raises(CRDGenerationError, match=r"\.status: NoStatus has no status"):
        render_crd(NoStatus, names=CRDNames(group="g.io", version="v1", kind="NoStatus", plural="ns"))


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"a": {}}}, r"\.a: every node .* needs a type"),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/x", "type": "string"}}},
            "'\\$ref' is not allowed",
        ),
        (
            {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "mutually exclusive",
        ),
        ({"type": "object", "required": ["a"]}, "required names unknown properties"),
        ({"type": "array"}, "need items"),
        ({"type": "integer", "format": "int16"}, "int32 or int64"),
        ({"type": "string", "enum": ["a"], "default": "b"}, "default 'b' is not one of"),
        ({"type": "boolean", "default": "yes"}, "not of type boolean"),
        ({"type": "integer", "format": "int32", "enum": [True]}, "not of type integer"),
        (
            {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            "list map key 'name' must be a required or defaulted property",
        ),
        (
            {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object"}},
            "set needs scalar items",
        ),
    ],
)
def test_check_structural_rejects(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(CRDGenerationError, match=message):
        check_structural(schema)


def test_check_structural_accepts_int_or_string_without_type() -> None:
    check_structural({"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True}}})
