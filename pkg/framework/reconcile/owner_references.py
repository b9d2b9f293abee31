"""Owner references by controller-runtime's ``controllerutil`` rules: who an object's owner is, who
controls it, and how a reference is named in an error.

Kept apart from :mod:`~pkg.framework.reconcile.resource_builder` because a reference is also
built on its own (a ResourceSlice's Node owner, a DaemonSet's ConfigMap owner) and read back
(:func:`controller_of`), without a builder around it.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes.client import V1ObjectMeta, V1OwnerReference

from pkg.framework.client.kinds import ResourceKind


class HasMetadata(Protocol):
    """Any API object: the kubernetes client's models and our CRD models alike."""

    @property
    def metadata(self) -> V1ObjectMeta | None: ...


class OwnerReferenceError(ValueError):
    """An owner reference the API server or the garbage collector would not honour."""


class AlreadyOwnedError(OwnerReferenceError):
    """The object already has another controller: two controllers would fight over it."""


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def same_object(a: V1OwnerReference, b: V1OwnerReference) -> bool:
    """controller-runtime's ``referSameObject``: the version may differ, group, kind and name may not."""
    return (_group(a.api_version), a.kind, a.name) == (_group(b.api_version), b.kind, b.name)


def describe(kind: str | None, namespace: str | None, name: str | None) -> str:
    key = f"{namespace}/{name}" if namespace else str(name)
    return f"{kind} {key}" if kind else key


def reference_to(
    owner: HasMetadata,
    kind: ResourceKind[Any],
    *,
    controller: bool = False,
    block_owner_deletion: bool = False,
) -> V1OwnerReference:
    """The owner reference to ``owner`` (of ``kind``; objects read from a list carry no kind).

    Raises :class:`OwnerReferenceError` when ``owner`` has no name or uid: a reference without a uid
    points at nothing, so the owner must be one read from the API server. The flags are written only
    when true, as the API server would omit them.
    """
    meta = owner.metadata
    if meta is None or not meta.name or not meta.uid:
        name = meta.name if meta is not None else None
        raise OwnerReferenceError(
            f"{describe(kind.kind, meta.namespace if meta else None, name)} has no name or uid and cannot"
            " own an object (was it read from the API?)"
        )
    flags: dict[str, bool] = {}
    if controller:
        flags["controller"] = True
    if block_owner_deletion:
        flags["block_owner_deletion"] = True
    return V1OwnerReference(
        api_version=kind.api_version, kind=kind.kind, name=meta.name, uid=meta.uid, **flags
    )


def controller_reference(
    owner: HasMetadata, kind: ResourceKind[Any], *, block_owner_deletion: bool = True
) -> V1OwnerReference:
    """The reference that makes ``owner`` the controller (see :meth:`ResourceBuilder.controlled_by`)."""
    return reference_to(owner, kind, controller=True, block_owner_deletion=block_owner_deletion)


def controller_of(meta: V1ObjectMeta | None) -> V1OwnerReference | None:
    """The object's controller reference, if it has one (``metav1.GetControllerOf``)."""
    refs = (meta.owner_references if meta is not None else None) or []
    return next((ref for ref in refs if ref.controller), None)


__all__ = [
    "AlreadyOwnedError",
    "HasMetadata",
    "OwnerReferenceError",
    "controller_of",
    "controller_reference",
    "describe",
    "reference_to",
    "same_object",
]
