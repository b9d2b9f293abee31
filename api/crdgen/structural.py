"""A self-check that a schema is structural, run on every generated schema.

The API server rejects a CRD whose schema is not structural, but only when the CRD is applied,
with a message about the CRD rather than the model. Checking here makes a bad model fail
``hack/generate_crds.py`` (and the unit tests) with the JSON path of the offending field.

Rules checked (the subset of the API server's rules our generator could break):
- every node has a ``type`` from the OpenAPI set, unless it is int-or-string or preserves unknown
  fields; ``$ref``, unions, ``not``, ``const``, ``title`` and ``uniqueItems`` do not appear;
- ``properties`` and ``additionalProperties`` are not both set, and only on objects; ``items``
  only, and always, on arrays; ``required`` names existing properties;
- integers say ``format: int32`` or ``int64``;
- ``enum`` values and ``default`` match the node's type, and a default is one of the enum values;
- ``x-kubernetes-list-type`` is atomic, set (scalar items) or map (object items whose map keys are
  required or defaulted).
"""

from __future__ import annotations

from typing import Any, Final

from api.crdgen.errors import CRDGenerationError

_TYPES: Final[dict[str, type | tuple[type, ...]]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}
_FORBIDDEN: Final = ("$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "const", "title", "uniqueItems")
_UNTYPED_ALLOWED: Final = ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")


def check_structural(schema: dict[str, Any]) -> None:
    """Raise ``CRDGenerationError`` at the first node of ``schema`` that is not structural."""
    _check(schema, "")


def _check(node: Any, path: str) -> None:
    if not isinstance(node, dict):
        raise CRDGenerationError(path, f"schema node must be an object, got {type(node).__name__}")
    for key in _FORBIDDEN:
        if key in node:
            raise CRDGenerationError(path, f"{key!r} is not allowed in a structural schema")
    kind = node.get("type")
    if kind is None and not any(node.get(flag) for flag in _UNTYPED_ALLOWED):
        raise CRDGenerationError(path, "every node of a structural schema needs a type")
    if kind is not None and kind not in _TYPES:
        raise CRDGenerationError(path, f"unknown type {kind!r}")
    _check_shape(node, kind, path)
    _check_values(node, kind, path)
    _check_list_type(node, path)
    for name, sub in node.get("properties", {}).items():
        _check(sub, f"{path}.{name}")
    if "items" in node:
        _check(node["items"], f"{path}[*]")
    if isinstance(node.get("additionalProperties"), dict):
        _check(node["additionalProperties"], f"{path}.*")


def _check_shape(node: dict[str, Any], kind: str | None, path: str) -> None:
    has_properties, has_additional = "properties" in node, "additionalProperties" in node
    if has_properties and has_additional:
        raise CRDGenerationError(path, "properties and additionalProperties are mutually exclusive")
    if (has_properties or has_additional or "required" in node) and kind != "object":
        raise CRDGenerationError(path, "properties, additionalProperties and required need type object")
    if (kind == "array") != ("items" in node):
        raise CRDGenerationError(path, "arrays, and only arrays, need items")
    missing = [name for name in node.get("required", []) if name not in node.get("properties", {})]
    if missing:
        raise CRDGenerationError(path, f"required names unknown properties {missing}")
    if kind == "integer" and node.get("format") not in ("int32", "int64"):
        raise CRDGenerationError(path, "integers need format int32 or int64")


def _check_values(node: dict[str, Any], kind: str | None, path: str) -> None:
    if kind is None:
        return
    for value in node.get("enum", []):
        if not _matches(value, kind):
            raise CRDGenerationError(path, f"enum value {value!r} is not of type {kind}")
    if "default" in node:
        default = node["default"]
        if not _matches(default, kind):
            raise CRDGenerationError(path, f"default {default!r} is not of type {kind}")
        if "enum" in node and default not in node["enum"]:
            raise CRDGenerationError(path, f"default {default!r} is not one of {node['enum']}")


def _matches(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, _TYPES[kind])


def _check_list_type(node: dict[str, Any], path: str) -> None:
    list_type = node.get("x-kubernetes-list-type")
    if list_type is None:
        if "x-kubernetes-list-map-keys" in node:
            raise CRDGenerationError(path, "x-kubernetes-list-map-keys needs x-kubernetes-list-type: map")
        return
    items = node.get("items", {})
    if list_type == "atomic":
        return
    if list_type == "set":
        if items.get("type") in ("object", "array"):
            raise CRDGenerationError(path, "x-kubernetes-list-type set needs scalar items")
        return
    if list_type != "map":
        raise CRDGenerationError(path, f"unknown x-kubernetes-list-type {list_type!r}")
    keys = node.get("x-kubernetes-list-map-keys") or []
    if items.get("type") != "object" or not keys:
        raise CRDGenerationError(path, "x-kubernetes-list-type map needs object items and map keys")
    for key in keys:
        field = items.get("properties", {}).get(key)
        if field is None or (key not in items.get("required", []) and "default" not in field):
            raise CRDGenerationError(path, f"list map key {key!r} must be a required or defaulted property")
