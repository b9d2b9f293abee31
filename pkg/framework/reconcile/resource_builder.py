"""ResourceBuilder: an object's metadata — names, labels, annotations, owner references and
finalizers — built in one style, so no reconcile assembles it by hand.

Why one builder: the rules for owner references and finalizers are easy to get subtly wrong when
each call site writes its own ``V1OwnerReference`` (a missing ``controller`` flag, a reference
across namespaces that the garbage collector ignores, two controllers fighting over one object).
The builder carries controller-runtime's ``controllerutil`` rules
(https://pkg.go.dev/sigs.k8s.io/controller-runtime/pkg/controller/controllerutil):

* :meth:`ResourceBuilder.controlled_by` is ``SetControllerReference``: ``controller: true`` and,
  by default, ``blockOwnerDeletion: true`` (foreground deletion of the owner waits for the object).
  It refuses an owner in another namespace, a namespaced owner of a cluster-scoped object, and a
  second controller (:class:`AlreadyOwnedError`), each error naming both objects. A reference to
  the same owner (same group, kind and name) is replaced, not added again.
* :meth:`ResourceBuilder.owned_by` is ``SetOwnerReference``: an owner that does not control.
* :meth:`ResourceBuilder.add_finalizer` / :meth:`ResourceBuilder.remove_finalizer` are
  ``AddFinalizer`` / ``RemoveFinalizer``: idempotent, order kept.
* Labels and annotations merge into what is there; a ``None`` value means *absent*: the key is
  left out of (or removed from) the object, and is a JSON ``null`` — remove — in a merge patch.

Two products, for the two ways the code writes metadata: :meth:`ResourceBuilder.meta` (a
``V1ObjectMeta`` for create and server-side apply, or an edited copy of one read from the cache,
see :meth:`ResourceBuilder.of`) and :meth:`ResourceBuilder.merge_patch` (the ``{"metadata": …}``
body of a JSON merge patch naming exactly the keys it sets or removes). Only what was given is
written: a field the builder was never told about keeps its value (``None`` for a new object), so
the objects built stay the same as the hand-written ones they replace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import V1ObjectMeta, V1OwnerReference

from pkg.framework.client.kinds import ResourceKind
from pkg.framework.reconcile.owner_references import (
    AlreadyOwnedError,
    HasMetadata,
    OwnerReferenceError,
    controller_reference,
    describe,
    reference_to,
    same_object,
)


class ResourceBuilder:
    """Builds one object's metadata; every method returns the builder, so calls chain.

    ``uid`` and ``resource_version`` are preconditions of a write (this object, this version of it);
    ``kind`` (optional) names the built object in errors.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        namespace: str | None = None,
        generate_name: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        kind: ResourceKind[Any] | None = None,
    ) -> None:
        self._base: V1ObjectMeta | None = None
        self._identity: dict[str, str] = {
            key: value
            for key, value in (
                ("name", name),
                ("namespace", namespace),
                ("generate_name", generate_name),
                ("uid", uid),
                ("resource_version", resource_version),
            )
            if value is not None
        }
        self._kind = kind
        self._labels: dict[str, str | None] | None = None
        self._annotations: dict[str, str | None] | None = None
        self._owners: list[V1OwnerReference] | None = None
        self._finalizers: list[str] | None = None

    @classmethod
    def of(cls, meta: V1ObjectMeta, *, kind: ResourceKind[Any] | None = None) -> ResourceBuilder:
        """Edits a copy of ``meta`` (an object read from the cache, which is shared and never
        mutated): :meth:`meta` returns ``meta`` with only the fields the builder changed replaced."""
        builder = cls(kind=kind)
        builder._base = meta
        return builder

    # --- labels and annotations -------------------------------------------------------------

    def labels(self, labels: Mapping[str, str | None]) -> ResourceBuilder:
        """Sets these labels (``None``: the label is absent) and keeps the others."""
        self._labels = self._merged(self._labels, "labels", labels)
        return self

    def annotations(self, annotations: Mapping[str, str | None]) -> ResourceBuilder:
        """Sets these annotations (``None``: the annotation is absent) and keeps the others."""
        self._annotations = self._merged(self._annotations, "annotations", annotations)
        return self

    def _merged(
        self, current: dict[str, str | None] | None, field: str, new: Mapping[str, str | None]
    ) -> dict[str, str | None]:
        if current is None:
            current = dict(getattr(self._base, field) or {}) if self._base is not None else {}
        return {**current, **new}

    # --- owner references -------------------------------------------------------------------

    def controlled_by(
        self, owner: HasMetadata, kind: ResourceKind[Any], *, block_owner_deletion: bool = True
    ) -> ResourceBuilder:
        """Makes ``owner`` the object's controller: the garbage collector deletes the object with it.

        ``block_owner_deletion=False`` is for a writer that may not set it: the API server requires
        permission to update the owner's finalizers for it (OwnerReferencesPermissionEnforcement).
        """
        return self._add_owner(
            controller_reference(owner, kind, block_owner_deletion=block_owner_deletion), owner
        )

    def owned_by(self, owner: HasMetadata, kind: ResourceKind[Any]) -> ResourceBuilder:
        """Adds ``owner`` as an owner that does not control the object."""
        return self._add_owner(reference_to(owner, kind), owner)

    def with_owner(self, reference: V1OwnerReference) -> ResourceBuilder:
        """Adds a reference built elsewhere (by :func:`controller_reference`), under the same rules
        but the namespace check, which needs the owner object."""
        return self._add_owner(reference, None)

    def _add_owner(self, reference: V1OwnerReference, owner: HasMetadata | None) -> ResourceBuilder:
        owner_namespace = owner.metadata.namespace if owner is not None and owner.metadata else None
        namespace = self._field("namespace")
        if owner_namespace:
            if not namespace:
                raise OwnerReferenceError(
                    f"cluster-scoped {self._name_of()} must not have a namespace-scoped owner"
                    f" ({describe(reference.kind, owner_namespace, reference.name)})"
                )
            if owner_namespace != namespace:
                owner_name = describe(reference.kind, owner_namespace, reference.name)
                raise OwnerReferenceError(
                    f"cross-namespace owner references are disallowed: {owner_name}"
                    f" cannot own {self._name_of()}"
                )
        owners = self._owners
        if owners is None:
            owners = list((self._base.owner_references if self._base is not None else None) or [])
        if reference.controller:
            existing = next((ref for ref in owners if ref.controller), None)
            if existing is not None and not same_object(existing, reference):
                raise AlreadyOwnedError(
                    f"{self._name_of()} is already controlled by"
                    f" {describe(existing.kind, None, existing.name)}:"
                    f" {describe(reference.kind, None, reference.name)} cannot control it too"
                )
        same = [i for i, ref in enumerate(owners) if same_object(ref, reference)]
        if same:
            owners[same[0]] = reference
        else:
            owners.append(reference)
        self._owners = owners
        return self

    # --- finalizers -------------------------------------------------------------------------

    def add_finalizer(self, finalizer: str) -> ResourceBuilder:
        """Adds ``finalizer`` at the end unless it is there already."""
        finalizers = self._current_finalizers()
        if finalizer not in finalizers:
            finalizers.append(finalizer)
        self._finalizers = finalizers
        return self

    def remove_finalizer(self, finalizer: str) -> ResourceBuilder:
        """Removes every occurrence of ``finalizer``; nothing happens when it is absent."""
        self._finalizers = [f for f in self._current_finalizers() if f != finalizer]
        return self

    def _current_finalizers(self) -> list[str]:
        if self._finalizers is not None:
            return self._finalizers
        return list((self._base.finalizers if self._base is not None else None) or [])

    # --- products ---------------------------------------------------------------------------

    def meta(self) -> V1ObjectMeta:
        """The metadata: a new ``V1ObjectMeta``, or for :meth:`of` a copy with the changes."""
        changes: dict[str, Any] = dict(self._identity)
        if self._labels is not None:
            changes["labels"] = _present(self._labels)
        if self._annotations is not None:
            changes["annotations"] = _present(self._annotations)
        if self._owners is not None:
            changes["owner_references"] = list(self._owners)
        if self._finalizers is not None:
            changes["finalizers"] = list(self._finalizers)
        if self._base is not None:
            return self._base.model_copy(update=changes)
        return V1ObjectMeta(**changes)

    def merge_patch(self) -> dict[str, Any]:
        """The body of a JSON merge patch (RFC 7386) of what the builder was given: a label or
        annotation set to ``None`` is removed, any other key of the object is left alone. A ``uid``
        or ``resource_version`` given to the constructor makes the patch apply only to that very
        object, or that very version of it."""
        metadata: dict[str, Any] = {}
        identity = (
            ("name", "name"),
            ("namespace", "namespace"),
            ("uid", "uid"),
            ("resource_version", "resourceVersion"),
        )
        for field, key in identity:
            if field in self._identity:
                metadata[key] = self._identity[field]
        if self._labels is not None:
            metadata["labels"] = dict(self._labels)
        if self._annotations is not None:
            metadata["annotations"] = dict(self._annotations)
        if self._owners is not None:
            metadata["ownerReferences"] = [
                ref.model_dump(by_alias=True, exclude_none=True, mode="json") for ref in self._owners
            ]
        if self._finalizers is not None:
            metadata["finalizers"] = list(self._finalizers)
        return {"metadata": metadata}

    def _field(self, field: str) -> str | None:
        if field in self._identity:
            return self._identity[field]
        value = getattr(self._base, field) if self._base is not None else None
        return str(value) if value else None

    def _name_of(self) -> str:
        name = self._field("name") or (
            f"{self._field('generate_name')}*" if self._field("generate_name") else None
        )
        return describe(self._kind.kind if self._kind else None, self._field("namespace"), name)


def _present(values: Mapping[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in values.items() if value is not None}


__all__ = ["ResourceBuilder"]
