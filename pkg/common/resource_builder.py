"""ResourceBuilder: one way to shape object metadata (spec §10.4 item 9).

Every controller sets owner references, finalizers, labels and annotations; done by hand each time
they drift (one forgets ``blockOwnerDeletion``, another appends a finalizer twice, a third leaves an
empty ``labels: {}`` behind that then looks like a change). These helpers mutate a
``V1ObjectMeta`` in place and are idempotent: each returns whether it changed anything, so a caller
can tell "already so" from "now so", and repeating a call is harmless.

They only touch the in-memory object; writing is the reconciler's resource wrapper's job (it turns
the difference into a JSON patch). Empty maps and lists are stored as ``None``, as the API server
returns them, so "added then removed" is no change at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import V1ObjectMeta, V1OwnerReference

from pkg.client.kinds import ResourceKind


class OwnershipConflictError(ValueError):
    """The object already has a different controller owner (Kubernetes allows only one)."""


def new_metadata(
    *,
    name: str,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    finalizers: list[str] | None = None,
    owner: V1OwnerReference | None = None,
) -> V1ObjectMeta:
    """Metadata for an object this project creates, with empty collections left out."""
    meta = V1ObjectMeta(
        name=name,
        namespace=namespace or None,
        labels=dict(labels) if labels else None,
        annotations=dict(annotations) if annotations else None,
        finalizers=list(dict.fromkeys(finalizers)) if finalizers else None,
    )
    if owner is not None:
        set_owner_reference(meta, owner)
    return meta


def owner_reference(
    kind: ResourceKind[Any],
    owner: V1ObjectMeta,
    *,
    controller: bool = True,
    block_owner_deletion: bool = True,
) -> V1OwnerReference:
    """A reference to ``owner`` (of ``kind``); by default the controlling one, blocking its deletion
    until the dependent is gone (foreground deletion)."""
    if not owner.name or not owner.uid:
        raise ValueError(f"an owner {kind.kind} needs a name and a uid, got {owner.name!r}/{owner.uid!r}")
    return V1OwnerReference(
        api_version=kind.api_version,
        kind=kind.kind,
        name=owner.name,
        uid=owner.uid,
        controller=controller,
        block_owner_deletion=block_owner_deletion,
    )


def set_owner_reference(meta: V1ObjectMeta, ref: V1OwnerReference) -> bool:
    """Adds ``ref`` or replaces the reference with the same uid.

    Raises :class:`OwnershipConflictError` when ``ref`` is a controller reference and another
    owner already controls the object: silently taking it over would start a tug of war.
    """
    refs = list(meta.owner_references or [])
    if ref.controller:
        for other in refs:
            if other.controller and other.uid != ref.uid:
                raise OwnershipConflictError(
                    f"{meta.name!r} is already controlled by {other.kind} {other.name!r} ({other.uid})"
                )
    for index, existing in enumerate(refs):
        if existing.uid == ref.uid:
            if existing == ref:
                return False
            refs[index] = ref
            meta.owner_references = refs
            return True
    meta.owner_references = [*refs, ref]
    return True


def has_finalizer(meta: V1ObjectMeta, finalizer: str) -> bool:
    return finalizer in (meta.finalizers or [])


def add_finalizer(meta: V1ObjectMeta, finalizer: str) -> bool:
    """Appends ``finalizer`` unless present."""
    if has_finalizer(meta, finalizer):
        return False
    meta.finalizers = [*(meta.finalizers or []), finalizer]
    return True


def remove_finalizer(meta: V1ObjectMeta, finalizer: str) -> bool:
    """Removes every occurrence of ``finalizer``; the list becomes ``None`` when empty."""
    if not has_finalizer(meta, finalizer):
        return False
    remaining = [f for f in meta.finalizers or [] if f != finalizer]
    meta.finalizers = remaining or None
    return True


def set_labels(meta: V1ObjectMeta, labels: Mapping[str, str]) -> bool:
    """Sets (adds or overwrites) the given labels; others are kept."""
    merged = {**(meta.labels or {}), **labels}
    if merged == (meta.labels or {}):
        return False
    meta.labels = merged or None
    return True


def remove_labels(meta: V1ObjectMeta, *keys: str) -> bool:
    remaining = {k: v for k, v in (meta.labels or {}).items() if k not in keys}
    if remaining == (meta.labels or {}):
        return False
    meta.labels = remaining or None
    return True


def set_annotations(meta: V1ObjectMeta, annotations: Mapping[str, str]) -> bool:
    """Sets (adds or overwrites) the given annotations; others are kept."""
    merged = {**(meta.annotations or {}), **annotations}
    if merged == (meta.annotations or {}):
        return False
    meta.annotations = merged or None
    return True


def remove_annotations(meta: V1ObjectMeta, *keys: str) -> bool:
    remaining = {k: v for k, v in (meta.annotations or {}).items() if k not in keys}
    if remaining == (meta.annotations or {}):
        return False
    meta.annotations = remaining or None
    return True
