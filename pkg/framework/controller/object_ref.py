"""ObjectRefWatch: reconcile the objects that reference a changed dependency.

A controller often depends on objects of another kind that its own objects *reference* by name
(a claim naming a device class, a GPU naming its node). When such a dependency changes, the
controller must reconcile every object that points at it, not the dependency itself. The two
decisions involved are kept apart, so each watch module states only what is specific to it:

* :class:`UpdateEventsFilter` ``(old, new) -> bool``: which updates of the dependency matter
  (e.g. only a changed spec or label). Creates and deletes pass unless ``create_filter`` or
  ``delete_filter`` says otherwise: a dependency appearing or vanishing is usually news to whoever
  references it, but a watch of a transition (an allocation released) may care about one only.
* :class:`ReferrersOf` ``(obj) -> list[Request]``: which of the controller's objects reference
  this dependency, typically through a cache index, never an API call.

On an update the enqueuer sees both the old and the new dependency (see
:class:`~pkg.framework.controller.enqueue.EnqueueingListener`), so objects that matched only before the
change are reconciled too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from pkg.framework.controller.controller import Controller, EventSource
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.predicate import Funcs, Predicate
from pkg.framework.reconcile.contract import Request

_log = logging.getLogger(__name__)


class UpdateEventsFilter(Protocol):
    """Whether an update of a dependency may change what its referrers should look like."""

    def __call__(self, old: Any, new: Any, /) -> bool: ...


class ReferrersOf(Protocol):
    """The requests of the objects that reference ``obj``."""

    def __call__(self, obj: Any, /) -> list[Request]: ...


class Watch(Protocol):
    """A controller's subscription to one source (the Go ``Watch(mgr, ctr) error``)."""

    def watch(self, source: EventSource, controller: Controller) -> None: ...


class ObjectRefWatch:
    """Watches a dependency kind and enqueues the controller's objects that reference it."""

    def __init__(
        self,
        *,
        update_filter: UpdateEventsFilter,
        enqueuer: ReferrersOf,
        create_filter: Callable[[Any], bool] | None = None,
        delete_filter: Callable[[Any], bool] | None = None,
    ) -> None:
        self._predicate = Funcs(create=create_filter, update=update_filter, delete=delete_filter)
        self._enqueuer = enqueuer

    @property
    def predicate(self) -> Predicate:
        """The events this watch lets through (a unit test of a watch asks it directly)."""
        return self._predicate

    def requests_for(self, obj: Any) -> list[Request]:
        """The requests an event about ``obj`` wakes (a unit test of a watch asks it directly)."""
        return self._enqueuer(obj)

    def watch(self, source: EventSource, controller: Controller) -> None:
        """Registers on ``source`` a handler that feeds ``controller``'s queue."""
        kind = source.kind.kind

        def enqueue(obj: Any) -> list[Request]:
            requests = self._enqueuer(obj)
            _log.debug(
                "%s %s changed: enqueue %d referrers",
                kind,
                obj.metadata.name,
                len(requests),
                extra={"controller": controller.name},
            )
            return requests

        controller.watch(
            source,
            EnqueueRequestsFromMapFunc(enqueue),
            predicates=[self._predicate],
        )


__all__ = ["ObjectRefWatch", "ReferrersOf", "UpdateEventsFilter", "Watch"]
