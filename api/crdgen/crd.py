"""A CustomResourceDefinition (apiextensions.k8s.io/v1) from a top-level model, and its YAML.

The model gives the schema (``structural_schema``); ``CRDNames`` and ``PrinterColumn`` give what a
model cannot say: names, scope and ``kubectl get`` columns. The root of the schema is normalised as
the API server expects it: ``apiVersion`` and ``kind`` are plain strings (the server sets them; an
enum or default there would be rejected), ``metadata`` is just ``type: object``. Every CRD serves and
stores its one version and has the status subresource, so a spec writer and a status writer never
overwrite each other.

YAML is rendered with sorted keys and a fixed width, so the same models always give the same bytes
and ``hack/generate_crds.py --check`` can compare files byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel

from api.crdgen.errors import CRDGenerationError
from api.crdgen.schema import structural_schema
from api.crdgen.structural import check_structural

_ROOT_FIELDS: Final[dict[str, dict[str, Any]]] = {
    "apiVersion": {
        "description": "APIVersion defines the versioned schema of this representation of an object.",
        "type": "string",
    },
    "kind": {
        "description": "Kind is a string value representing the REST resource this object represents.",
        "type": "string",
    },
    "metadata": {"type": "object"},
}


@dataclass(frozen=True, kw_only=True)
class CRDNames:
    """Names and scope of a custom resource; ``singular`` defaults to the lower-cased kind."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    scope: Literal["Cluster", "Namespaced"] = "Cluster"

    def as_names(self) -> dict[str, Any]:
        names: dict[str, Any] = {
            "kind": self.kind,
            "listKind": f"{self.kind}List",
            "plural": self.plural,
            "singular": self.singular or self.kind.lower(),
        }
        if self.short_names:
            names["shortNames"] = list(self.short_names)
        if self.categories:
            names["categories"] = list(self.categories)
        return names


@dataclass(frozen=True, kw_only=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry; priority 0 is shown by ``kubectl get``, 1 by ``-o wide``."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    priority: int = 0
    description: str = field(default="")

    def as_column(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "jsonPath": self.json_path, "type": self.type}
        if self.priority:
            column["priority"] = self.priority
        if self.description:
            column["description"] = self.description
        return column


AGE_COLUMN: Final = PrinterColumn(name="Age", json_path=".metadata.creationTimestamp", type="date")


def render_crd(
    model: type[BaseModel],
    *,
    names: CRDNames,
    columns: Sequence[PrinterColumn] = (),
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The CRD of ``model`` as a dict ready for YAML or for the apiextensions API."""
    schema = _normalise_root(structural_schema(model))
    if "status" not in schema.get("properties", {}):
        raise CRDGenerationError(
            ".status", f"{model.__name__} has no status, but CRDs get a status subresource"
        )
    metadata: dict[str, Any] = {"name": f"{names.plural}.{names.group}"}
    if labels:
        metadata["labels"] = dict(labels)
    version: dict[str, Any] = {
        "name": names.version,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": schema},
    }
    if columns:
        version["additionalPrinterColumns"] = [column.as_column() for column in columns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": names.group,
            "names": names.as_names(),
            "scope": names.scope,
            "versions": [version],
        },
    }


def dump_yaml(document: Mapping[str, Any], *, header: str = "") -> str:
    """Deterministic YAML of one document: sorted keys, block style, 100 columns, ``---`` first."""
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    body = yaml.safe_dump(dict(document), sort_keys=True, default_flow_style=False, width=100)
    return f"{comment}---\n{body}"


def _normalise_root(schema: dict[str, Any]) -> dict[str, Any]:
    properties = {**schema.get("properties", {}), **_ROOT_FIELDS}
    required = [name for name in schema.get("required", []) if name not in _ROOT_FIELDS]
    root = {key: value for key, value in schema.items() if key not in ("properties", "required")}
    root["properties"] = properties
    if required:
        root["required"] = required
    check_structural(root)
    return root
