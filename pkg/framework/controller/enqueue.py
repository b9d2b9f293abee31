"""Enqueue: which requests an event should wake (controller-runtime's ``handler`` package).

A :class:`RequestMapper` maps one object to the requests of the objects that must be reconciled
because it changed: itself (:class:`EnqueueRequestForObject`) or whatever a function finds
(:class:`EnqueueRequestsFromMapFunc`: the GPUs on a Node, the claims naming a class, the one
request of a singleton controller). Mapping is all a mapper does; it reads only names and
references, never the payload's state, because the reconciler reads state itself from the cache
(level-based). (controller-runtime calls these "event handlers"; here "handler" means only a step
of a reconcile, so the mapping has its own name.)

:class:`EnqueueingListener` is the glue an informer or a source sees: it implements
:class:`~pkg.framework.cache.listener.ResourceListener` (and ``on_generic`` for a
:mod:`~pkg.framework.controller.source`), applies the predicates, maps and adds the requests to a
queue. Event-specific rules live here once:

* an update maps both the old and the new object, so a reference that moved from one owner to
  another wakes both (the old owner must notice it lost a child);
* a delete seen only by a re-list arrives as :class:`DeletedFinalStateUnknown`; its ``obj`` is the
  last known state, good enough for names and references;
* with a :class:`~pkg.framework.workqueue.priority.PriorityQueue`, events that report nothing new
  are queued at :data:`~pkg.framework.workqueue.priority.LOW_PRIORITY`: adds from the informer's
  initial list (``is_in_initial_list``) and updates whose resourceVersion did not change (a
  periodic resync hands the same object twice; a re-list finds an object as it was). Every other
  event, and every generic event, gets the default priority, so a user's change overtakes a
  start-up or resync backlog. These are controller-runtime's rules; predicates still see every
  event, whatever its priority.

Listeners run on the informer's dispatch thread (or a source's thread); adding to a queue never
blocks, so they return fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.framework.controller.predicate import Predicate
from pkg.framework.reconcile.contract import Request
from pkg.framework.workqueue.priority import DEFAULT_PRIORITY, LOW_PRIORITY, PriorityQueue


class RequestMapper(Protocol):
    """Maps an object that changed to the requests it should wake."""

    def requests_for(self, obj: Any) -> Iterable[Request]: ...


class RequestQueue(Protocol):
    def add(self, item: Request) -> None: ...


class EnqueueRequestForObject:
    """Wakes the object itself."""

    def requests_for(self, obj: Any) -> list[Request]:
        return [Request(name=obj.metadata.name, namespace=obj.metadata.namespace or "")]


class EnqueueRequestsFromMapFunc:
    """Wakes whatever ``fn`` returns for the object (e.g. the objects that reference it)."""

    def __init__(self, fn: Callable[[Any], Iterable[Request]]) -> None:
        self._fn = fn

    def requests_for(self, obj: Any) -> list[Request]:
        return list(self._fn(obj))


class EnqueueingListener:
    """Adapts a :class:`RequestMapper` and predicates to an informer or a source; adds to ``queue``."""

    def __init__(
        self, *, mapper: RequestMapper, queue: RequestQueue, predicates: Sequence[Predicate] = ()
    ) -> None:
        self._mapper = mapper
        self._queue = queue
        self._predicates = tuple(predicates)

    def on_add(self, obj: Any, *, is_in_initial_list: bool) -> None:
        if all(p.create(obj) for p in self._predicates):
            priority = LOW_PRIORITY if is_in_initial_list else DEFAULT_PRIORITY
            self._enqueue(self._mapper.requests_for(obj), priority=priority)

    def on_update(self, old: Any, new: Any) -> None:
        if all(p.update(old, new) for p in self._predicates):
            # A set: old and new usually map to the same requests; the queue would drop the
            # duplicates too, but only after counting them as adds.
            requests = sorted({*self._mapper.requests_for(old), *self._mapper.requests_for(new)})
            self._enqueue(requests, priority=LOW_PRIORITY if _unchanged(old, new) else DEFAULT_PRIORITY)

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if all(p.delete(obj) for p in self._predicates):
            self._enqueue(self._mapper.requests_for(obj))

    def on_generic(self, obj: Any) -> None:
        """An event of a :class:`~pkg.framework.controller.source.Source` (``obj`` may be ``None``)."""
        if all(p.generic(obj) for p in self._predicates):
            self._enqueue(self._mapper.requests_for(obj))

    def _enqueue(self, requests: Iterable[Request], *, priority: int = DEFAULT_PRIORITY) -> None:
        queue = self._queue
        for request in requests:
            if isinstance(queue, PriorityQueue):
                queue.add(request, priority=priority)
            else:
                queue.add(request)


def _unchanged(old: Any, new: Any) -> bool:
    """Whether an update carries no change: both sides have the same, known resourceVersion."""
    version = old.metadata.resource_version
    return version is not None and version == new.metadata.resource_version


__all__ = [
    "EnqueueRequestForObject",
    "EnqueueRequestsFromMapFunc",
    "EnqueueingListener",
    "RequestMapper",
    "RequestQueue",
]
