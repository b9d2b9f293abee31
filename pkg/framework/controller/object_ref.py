"""ObjectRefWatch: reconcile the objects that reference a changed dependency.

A controller often depends on objects of another kind that its own objects *reference* by name
(a claim naming a device class, a GPU naming its node). When such a dependency changes, the
controller must reconcile every object that points at it, not the dependency itself. The two
decisions involved are kept apart, so each watch module states only what is specific to it:

* :class:`UpdateEventsFilter` ``(old, new) -> bool``: which updates of the dependency matter
  (e.g. only a changed spec or label). Creates and deletes always pass: a dependency appearing or
  vanishing is always news to whoever references it.
* :class:`ReferrersOf` ``(obj) -> list[Request]``: which of the controller's objects reference
  this dependency, typically through a cache index, never an API call.

On an update the enqueuer sees both the old and the new dependency (see
:class:`~pkg.framework.controller.enqueue.EnqueueingListener`), so objects that matched only before the
change are reconciled too.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from pkg.framework.controller.controller import Controller, EventSource
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.predicate import Funcs
from pkg.framework.reconcile.contract import Request

_log = logging.getLogger(__name__)


class UpdateEventsFilter(Protocol):
    """Whether an update of a dependency may change what its referrers should look like."""

    def __call__(self, old: Any, new: Any) -> bool: ...


class ReferrersOf(Protocol):
    """The requests of the objects that reference ``obj``."""

    def __call__(self, obj: Any) -> list[Request]: ...


class Watch(Protocol):
    """A controller's subscription to one source (the Go ``Watch(mgr, ctr) error``)."""

    def watch(self, source: EventSource, controller: Controller) -> None: ...


class ObjectRefWatch:
    """Watches a dependency kind and enqueues the controller's objects that reference it."""

    def __init__(self, *, update_filter: UpdateEventsFilter, enqueuer: ReferrersOf) -> None:
        self._update_filter = update_filter
        self._enqueuer = enqueuer

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
            predicates=[Funcs(update=self._update_filter)],
        )


__all__ = ["ObjectRefWatch", "ReferrersOf", "UpdateEventsFilter", "Watch"]
