"""Resource: fetch one object, let handlers edit a copy, write back only what changed.

One place owns fetch, status update and metadata patch, so every controller
writes the same way. The wrapper keeps two deep copies of the fetched object: ``original`` (the
baseline, never edited) and ``changed()`` (what handlers edit). :meth:`Resource.update` compares
them and makes at most two requests:

1. **metadata**: finalizers, labels and annotations that differ, as one RFC 6902 JSON patch that
   starts with a ``test`` of ``/metadata/resourceVersion``. The patch names only the paths we
   changed, so labels or finalizers other writers own are never overwritten.
2. **status**: a PUT of the status subresource when the status differs (compared in JSON form) or
   ``status.observedGeneration`` lags ``metadata.generation``. ``observedGeneration`` is always set
   here, never by handlers. The body is the last object the server returned to
   us with the new status, so its resourceVersion is one we actually observed.

Order: metadata first, then status (as in the Go reference's wrapper). A finalizer must be stored
before any status that announces work it guards, and removing the last finalizer of a deleted
object deletes it, after which a status write is pointless and is skipped. The patch is a
compare-and-swap on the fetched version, and the status PUT then uses the version the patch
returned: anything another writer did in between makes one of them fail with a conflict instead
of being overwritten. When there is no metadata change the PUT uses the fetched version.

A stale version (someone else wrote since our read) raises :class:`ConflictRequeue`; the reconciler
turns it into ``Result(requeue=True)``: a conflict is routine, not an error, and the next pass reads
the new state. A write that finds the object gone (404) ends the update quietly: there is nothing
left to reconcile. A no-op update makes no API call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from kubernetes.client import V1ObjectMeta
from pydantic import BaseModel

from pkg.framework.client.errors import ConflictError, NotFoundError
from pkg.framework.client.patch import metadata_patch, test_op
from pkg.framework.reconcile.contract import Request
from pkg.framework.reconcile.writer import ResourceWriter

logger = logging.getLogger(__name__)

ObjT = TypeVar("ObjT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=BaseModel)

# Field names of the wrapped models (python names; the JSON form is camelCase).
_METADATA, _STATUS, _OBSERVED_GENERATION = "metadata", "status", "observed_generation"
_PATCHED_METADATA = frozenset({"finalizers", "labels", "annotations"})


class ConflictRequeue(Exception):  # noqa: N818 - a signal, like StopIteration, not an error
    """A write was refused because the object changed since it was read; reconcile again."""

    def __init__(self, *, key: str, write: str, cause: ConflictError) -> None:
        super().__init__(f"{write} write of {key} conflicted: {cause.message}")
        self.key, self.write, self.cause = key, write, cause


class Resource(Generic[ObjT, StatusT]):
    """One object under reconciliation. Not thread-safe: one instance per reconcile call.

    ``getter`` reads the object (an informer store lookup or a client GET); returning ``None`` or
    raising ``NotFoundError`` both mean "not found". The object it returns is never mutated.
    ``status_type`` builds an empty status when the object has none yet; it must have an
    ``observed_generation`` field.
    """

    def __init__(
        self,
        request: Request,
        *,
        getter: Callable[[Request], ObjT | None],
        writer: ResourceWriter[ObjT],
        status_type: type[StatusT],
    ) -> None:
        if _OBSERVED_GENERATION not in status_type.model_fields:
            raise TypeError(f"{status_type.__name__} has no {_OBSERVED_GENERATION} field")
        self.request = request
        self._getter, self._writer, self._status_type = getter, writer, status_type
        self._original: ObjT | None = None
        self._changed: ObjT | None = None

    def fetch(self) -> ObjT | None:
        """Reads the object; returns the working copy (same as :meth:`changed`) or ``None``."""
        try:
            obj = self._getter(self.request)
        except NotFoundError:
            obj = None
        self._accept(obj)
        return self._changed

    def is_empty(self) -> bool:
        """True before a successful fetch, when the object was not found, or once it is gone."""
        return self._original is None

    @property
    def original(self) -> ObjT:
        """The object as last read or written. A baseline for comparisons: do not edit it."""
        if self._original is None:
            raise LookupError(f"{self.request}: no object (not fetched, not found or gone)")
        return self._original

    def changed(self) -> ObjT:
        """The working copy handlers edit; :meth:`update` writes its differences."""
        if self._changed is None:
            raise LookupError(f"{self.request}: no object (not fetched, not found or gone)")
        return self._changed

    def status(self) -> StatusT:
        """The working copy's status, created empty if the object has none yet."""
        changed = self.changed()
        status = getattr(changed, _STATUS)
        if status is None:
            status = self._status_type()
            setattr(changed, _STATUS, status)
        if not isinstance(status, self._status_type):
            raise TypeError(f"{self.request}: status is {type(status).__name__}, not {self._status_type}")
        return status

    def update(self) -> None:
        """Writes what handlers changed (metadata patch, then status PUT); see the module docs.

        Raises :class:`ConflictRequeue` on a stale version; other API errors propagate.
        """
        original, changed = self.original, self.changed()
        _warn_unwritten_metadata(self.request, _meta(original), _meta(changed))
        current = original
        write = "metadata"
        try:
            ops = metadata_patch(_meta(original), _meta(changed))
            if ops:
                current = self._patch(current, ops)
                if _meta(current).deletion_timestamp and not _meta(current).finalizers:
                    logger.debug(
                        "last finalizer removed, object deleted", extra={"object": str(self.request)}
                    )
                    self._accept(None)
                    return
            write = "status"
            body = self._status_body(current)
            if body is not None:
                current = self._writer.update_status(body)
        except ConflictError as exc:
            raise ConflictRequeue(key=str(self.request), write=write, cause=exc) from exc
        except NotFoundError:
            logger.debug("object gone before its %s write", write, extra={"object": str(self.request)})
            self._accept(None)
            return
        self._accept(current)

    # -- internals -------------------------------------------------------------------------------

    def _patch(self, current: ObjT, ops: list[Any]) -> ObjT:
        meta = _meta(current)
        guarded = [test_op("/metadata/resourceVersion", meta.resource_version), *ops]
        return self._writer.patch_metadata(
            name=meta.name or self.request.name, namespace=meta.namespace, ops=guarded
        )

    def _status_body(self, current: ObjT) -> ObjT | None:
        """``current`` with the working copy's status and observedGeneration, or None if no write is due."""
        original_status, status = getattr(self.original, _STATUS), getattr(self.changed(), _STATUS)
        generation = _meta(current).generation
        observed = getattr(status, _OBSERVED_GENERATION, None)
        if _dump(original_status) == _dump(status) and (generation is None or observed == generation):
            return None
        status = (status or self._status_type()).model_copy(deep=True)
        setattr(status, _OBSERVED_GENERATION, generation)
        body = current.model_copy(deep=True)
        setattr(body, _STATUS, status)
        return body

    def _accept(self, obj: ObjT | None) -> None:
        self._original = None if obj is None else obj.model_copy(deep=True)
        self._changed = None if obj is None else obj.model_copy(deep=True)


def _meta(obj: BaseModel) -> V1ObjectMeta:
    meta = getattr(obj, _METADATA, None)
    if not isinstance(meta, V1ObjectMeta):
        raise TypeError(f"{type(obj).__name__} has no V1ObjectMeta metadata")
    return meta


def _dump(model: BaseModel | None) -> dict[str, Any] | None:
    return None if model is None else model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _warn_unwritten_metadata(request: Request, original: V1ObjectMeta, changed: V1ObjectMeta) -> None:
    """Handlers may change only finalizers, labels and annotations; say so if they did more."""
    before = original.model_dump(exclude=set(_PATCHED_METADATA), exclude_none=True, mode="json")
    after = changed.model_dump(exclude=set(_PATCHED_METADATA), exclude_none=True, mode="json")
    fields = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if fields:
        logger.warning("metadata changes not written: %s", ", ".join(fields), extra={"object": str(request)})
