"""The objects an allocation depends on, read from a YAML bundle (no cluster).

A bundle is a multi-document YAML file (``kubectl get -o yaml`` output works: a ``List`` is
flattened) holding ResourceSlices, DeviceClasses and ResourceClaims of ``resource.k8s.io/v1``,
and optionally Namespaces (their labels decide admin access) and Nodes (for ``--node``). Every
document is validated with the Kubernetes client's models, which reject unknown fields, so a typo
in a bundle is an error naming the file, the document and the object, never a silently different
allocation. Empty documents are skipped.

A bundle is untrusted input: it is read within bounds of size, encoding, nesting and alias
expansion (:mod:`.bundle_yaml`); a claim the API server would reject is rejected with the API's
own message (:mod:`.claim_validation`); an object that appears twice — two ResourceSlices of one
name included, which a cluster cannot hold — is an error naming both documents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClass,
    V1Namespace,
    V1Node,
    V1ResourceSlice,
)
from pydantic import ValidationError

from pkg.dra.explain.bundle_yaml import BundleYamlError, load_documents, read_text
from pkg.dra.explain.claim_validation import claim_errors
from pkg.framework.client import ResourceKind
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, NODE, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.keys import namespaced_key

KINDS: dict[str, ResourceKind[Any]] = {
    k.kind: k for k in (RESOURCE_SLICE, DEVICE_CLASS, RESOURCE_CLAIM, NAMESPACE, NODE)
}


class BundleError(Exception):
    """The bundle cannot be used; the message names the file, document and object."""


@dataclass
class ExplainObjects:
    """The objects an explanation is computed from (from a bundle or from the cluster)."""

    slices: list[V1ResourceSlice] = field(default_factory=list)
    classes: dict[str, V1DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceV1ResourceClaim] = field(default_factory=dict)  # namespace/name
    namespaces: dict[str, V1Namespace] = field(default_factory=dict)
    nodes: dict[str, V1Node] = field(default_factory=dict)
    origins: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)  # (kind, key) -> where

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.namespaces.get(namespace)
        return dict((ns.metadata.labels if ns is not None and ns.metadata else None) or {})

    def add(self, obj: Any, where: str) -> None:
        """Files one decoded object; a claim without a namespace lands in ``default``."""
        meta = obj.metadata
        if meta is None or not meta.name:
            raise BundleError(f"{where}: metadata.name is missing")
        name = str(meta.name)
        kind = type(obj).__name__
        if isinstance(obj, V1ResourceSlice):
            self._remember(kind, name, where)
            self.slices.append(obj)
            return
        if isinstance(obj, ResourceV1ResourceClaim):
            meta.namespace = meta.namespace or "default"
            key = namespaced_key(meta.namespace, name)
            if errors := claim_errors(obj):
                raise BundleError(f"{where}: ResourceClaim {key} is invalid: {'; '.join(errors)}")
            target: dict[str, Any] = self.claims
        else:
            key = name
            by_type: dict[type, dict[str, Any]] = {
                V1DeviceClass: self.classes,
                V1Namespace: self.namespaces,
                V1Node: self.nodes,
            }
            target = by_type[type(obj)]
        self._remember(kind, key, where)
        target[key] = obj

    def _remember(self, kind: str, key: str, where: str) -> None:
        first = self.origins.setdefault((kind, key), where)
        if first != where:
            raise BundleError(f"{where}: {kind} {key} appears twice (first in {first})")


def _documents(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        raw = load_documents(path, read_text(path))
    except BundleYamlError as err:
        raise BundleError(str(err)) from None
    docs: list[tuple[str, dict[str, Any]]] = []
    for index, doc in enumerate(raw, start=1):
        where = f"{path}: document {index}"
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise BundleError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List"):
            items = doc.get("items")
            if items is not None and not isinstance(items, list):
                raise BundleError(f"{where}: {_short(kind)}: items is a {type(items).__name__}, not a list")
            for item_index, item in enumerate(items or [], start=1):
                if not isinstance(item, dict):
                    raise BundleError(f"{where}, item {item_index}: expected a Kubernetes object")
                docs.append((f"{where}, item {item_index}", item))
        else:
            docs.append((where, doc))
    return docs


def _decode(where: str, doc: dict[str, Any]) -> Any:
    kind_name = doc.get("kind")
    kind = KINDS.get(kind_name) if isinstance(kind_name, str) else None
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    name = _short(name) if isinstance(name, str) else "<unnamed>"
    kind_name = _short(kind_name) if isinstance(kind_name, str) else f"<{type(kind_name).__name__}>"
    if kind is None:
        expected = ", ".join(KINDS)
        raise BundleError(f"{where}: unsupported kind {kind_name!r} ({name}); expected one of {expected}")
    if doc.get("apiVersion") != kind.api_version:
        found = doc.get("apiVersion")
        found = _short(found) if isinstance(found, str) else f"<{type(found).__name__}>"
        raise BundleError(f"{where}: {kind.kind} {name}: apiVersion {found!r}, expected {kind.api_version!r}")
    try:
        return kind.decode(doc)
    except ValidationError as err:
        found = err.errors(include_url=False, include_input=False)
        problems = "; ".join(
            f"{'.'.join(_short(str(p)) for p in e['loc'])}: {e['msg']}" for e in found[:_MAX_PROBLEMS]
        )
        if len(found) > _MAX_PROBLEMS:
            problems += f"; and {len(found) - _MAX_PROBLEMS} more"
        raise BundleError(f"{where}: {kind.kind} {name} is invalid: {problems}") from None


_MAX_PROBLEMS = 10


def _short(text: str) -> str:
    """A name or kind for a message: never a document's worth of text."""
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text)} characters)"


def load_bundle(path: Path) -> ExplainObjects:
    """Reads and validates a bundle; raises :class:`BundleError` on the first problem."""
    objects = ExplainObjects()
    for where, doc in _documents(path):
        objects.add(_decode(where, doc), where)
    if not objects.slices and not objects.claims:
        raise BundleError(f"{path}: no ResourceSlices and no ResourceClaims in the bundle")
    return objects
