"""Event handlers: which requests an event about an object should wake (controller-runtime's ``handler``).

An :class:`RequestMapper` maps one object to the requests of the objects that must be reconciled
because it changed: itself (:class:`EnqueueRequestForObject`), its controlling owner
(:class:`EnqueueRequestForOwner`), or whatever a function finds (:class:`EnqueueRequestsFromMapFunc`).
Mapping is all a handler does; it reads only names and references, never the payload's state,
because the reconciler reads state itself from the cache (level-based).

:class:`EnqueueingListener` is the glue an informer sees: it implements
:class:`~pkg.framework.cache.listener.ResourceListener`, applies the predicates, maps and adds
the requests to a queue. Event-specific rules live here once:

* an update maps both the old and the new object, so a reference that moved from one owner to
  another wakes both (the old owner must notice it lost a child);
* a delete seen only by a re-list arrives as :class:`DeletedFinalStateUnknown`; its ``obj`` is the
  last known state, good enough for names and references.

Handlers run on the informer's dispatch thread; adding to a queue never blocks, so they return fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.framework.controller.predicate import Predicate
from pkg.framework.reconcile.contract import Request


class RequestMapper(Protocol):
    """Maps an object that changed to the requests it should wake."""

    def requests_for(self, obj: Any) -> Iterable[Request]: ...


class RequestQueue(Protocol):
    def add(self, item: Request) -> None: ...


class EnqueueRequestForObject:
    """Wakes the object itself."""

    def requests_for(self, obj: Any) -> list[Request]:
        return [Request(name=obj.metadata.name, namespace=obj.metadata.namespace or "")]


class EnqueueRequestForOwner:
    """Wakes the owners of the object named by its ``metadata.ownerReferences``.

    Only references to ``owner_kind`` in ``owner_api_group`` (``""`` for the core group) count, and,
    with ``is_controller``, only the one whose ``controller`` flag is set. A namespaced owner lives
    in its child's namespace (the API forbids cross-namespace owners); pass
    ``owner_namespaced=False`` for a cluster-scoped owner, whose request has no namespace.
    """

    def __init__(
        self,
        *,
        owner_kind: str,
        owner_api_group: str,
        is_controller: bool = True,
        owner_namespaced: bool = True,
    ) -> None:
        self._kind = owner_kind
        self._group = owner_api_group
        self._is_controller = is_controller
        self._namespaced = owner_namespaced

    def requests_for(self, obj: Any) -> list[Request]:
        namespace = (obj.metadata.namespace or "") if self._namespaced else ""
        return [
            Request(name=ref.name, namespace=namespace)
            for ref in obj.metadata.owner_references or ()
            if ref.kind == self._kind
            and _group_of(ref.api_version) == self._group
            and (ref.controller or not self._is_controller)
        ]


class EnqueueRequestsFromMapFunc:
    """Wakes whatever ``fn`` returns for the object (e.g. the objects that reference it)."""

    def __init__(self, fn: Callable[[Any], Iterable[Request]]) -> None:
        self._fn = fn

    def requests_for(self, obj: Any) -> list[Request]:
        return list(self._fn(obj))


class EnqueueingListener:
    """Adapts an :class:`RequestMapper` and predicates to an informer, adding requests to ``queue``."""

    def __init__(
        self, *, handler: RequestMapper, queue: RequestQueue, predicates: Sequence[Predicate] = ()
    ) -> None:
        self._handler = handler
        self._queue = queue
        self._predicates = tuple(predicates)

    def on_add(self, obj: Any, *, is_in_initial_list: bool) -> None:
        if all(p.create(obj) for p in self._predicates):
            self._enqueue(self._handler.requests_for(obj))

    def on_update(self, old: Any, new: Any) -> None:
        if all(p.update(old, new) for p in self._predicates):
            # A set: old and new usually map to the same requests; the queue would drop the
            # duplicates too, but only after counting them as adds.
            self._enqueue(sorted({*self._handler.requests_for(old), *self._handler.requests_for(new)}))

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if all(p.delete(obj) for p in self._predicates):
            self._enqueue(self._handler.requests_for(obj))

    def _enqueue(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self._queue.add(request)


def _group_of(api_version: str) -> str:
    """``"gpu.deckhouse.io/v1alpha1"`` -> ``"gpu.deckhouse.io"``; ``"v1"`` (the core group) -> ``""``."""
    group, _, _version = api_version.rpartition("/")
    return group


__all__ = [
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EnqueueingListener",
    "RequestMapper",
    "RequestQueue",
]
