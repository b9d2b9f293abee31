"""Pydantic model -> Kubernetes structural OpenAPI v3 schema.

Pydantic writes JSON Schema 2020-12; a CRD wants OpenAPI v3 in the *structural* subset the API
server requires (every node typed, no references, no unions). The conversion, node by node:
- ``$ref`` is inlined. The referenced model's own ``description`` (its class docstring, written for
  Python readers) is dropped; the referring field's description is kept, so ``kubectl explain``
  shows what the field means where it is used.
- ``anyOf``/``oneOf``/``allOf`` with one non-null branch collapse to that branch. ``X | None`` is how
  a model says "optional"; in Kubernetes optional means "not in ``required``", and a field is not
  nullable unless it says so. Any other union is an error: it has no structural form.
- ``title`` is dropped, ``const`` becomes a one-value ``enum``, ``default: null`` is dropped (other
  defaults are kept and checked against the node's type and enum).
- Numeric ``exclusiveMinimum: n`` (2020-12) becomes ``minimum: n`` + ``exclusiveMinimum: true``
  (OpenAPI v3); ``uniqueItems`` becomes ``x-kubernetes-list-type: set`` (the API server rejects
  ``uniqueItems``); integers without a format get ``int64``.
- ``additionalProperties: false`` is dropped (pruning already drops unknown fields).
- Any keyword not known to be valid in a CRD is an error rather than passed through.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from api.crdgen.errors import CRDGenerationError
from api.crdgen.kube import KubeSchemaGenerator
from api.crdgen.structural import check_structural

_KEPT: Final = frozenset(
    {
        "type",
        "format",
        "description",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
        "x-kubernetes-validations",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
    }
)
_UNIONS: Final = ("anyOf", "oneOf", "allOf")
_NULL: Final = {"type": "null"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of ``model`` (camelCase names, as the API server sees objects).

    Raises ``CRDGenerationError`` naming the field when the model has no structural form."""
    raw = model.model_json_schema(by_alias=True, mode="validation", schema_generator=KubeSchemaGenerator)
    defs: dict[str, dict[str, Any]] = raw.pop("$defs", {})
    schema = _Converter(defs).convert(raw, path="", refs=())
    check_structural(schema)
    return schema


class _Converter:
    def __init__(self, defs: dict[str, dict[str, Any]]) -> None:
        self._defs = defs

    def convert(self, node: dict[str, Any], *, path: str, refs: tuple[str, ...]) -> dict[str, Any]:
        node, refs = self._flatten(node, path=path, refs=refs)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" or (key == "default" and value is None):
                continue
            if key == "const":
                out["enum"] = [value]
            elif key == "default":
                out["default"] = value
            elif key == "properties":
                properties = {
                    name: self.convert(sub, path=f"{path}.{name}", refs=refs) for name, sub in value.items()
                }
                if properties:
                    out["properties"] = properties
            elif key == "items":
                out["items"] = self.convert(value, path=f"{path}[*]", refs=refs)
            elif key == "additionalProperties":
                if value is True:
                    raise CRDGenerationError(
                        path, "free-form objects need x-kubernetes-preserve-unknown-fields"
                    )
                if value is not False:
                    out["additionalProperties"] = self.convert(value, path=f"{path}.*", refs=refs)
            elif key == "required":
                out["required"] = sorted(value)
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
                out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
                out[key] = True
            elif key == "uniqueItems":
                if value:
                    out.setdefault("x-kubernetes-list-type", "set")
            elif key in _KEPT:
                out[key] = value
            else:
                raise CRDGenerationError(path, f"JSON schema keyword {key!r} has no Kubernetes equivalent")
        if out.get("type") == "integer":
            out.setdefault("format", "int64")
        return out

    def _flatten(
        self, node: dict[str, Any], *, path: str, refs: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """Resolve ``$ref`` and single-branch unions until the node is a plain schema."""
        while True:
            union = next((key for key in _UNIONS if key in node), None)
            if union is not None:
                branches = [branch for branch in node[union] if branch != _NULL]
                if len(branches) != 1:
                    raise CRDGenerationError(
                        path, f"{union} with {len(branches)} non-null branches has no structural form"
                    )
                siblings = {key: value for key, value in node.items() if key != union}
                node = {**branches[0], **siblings}
            elif "$ref" in node:
                name = str(node["$ref"]).rsplit("/", 1)[-1]
                if name in refs:
                    raise CRDGenerationError(path, f"recursive model {name} has no structural form")
                if name not in self._defs:
                    raise CRDGenerationError(path, f"unresolvable reference {node['$ref']}")
                target = {key: value for key, value in self._defs[name].items() if key != "description"}
                siblings = {key: value for key, value in node.items() if key != "$ref"}
                node, refs = {**target, **siblings}, (*refs, name)
            else:
                return node, refs
