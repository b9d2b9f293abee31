"""Predicates: which events are worth a reconcile (controller-runtime's ``predicate`` package).

An informer reports every change of an object, including the ones a controller does not care
about: a status write bumps ``resourceVersion`` but not ``generation``, so a controller that acts
on the spec would wake itself up with its own status writes. A predicate drops such events
*before* they reach the queue. Dropping an event is safe only because reconcilers are
level-based: whatever a later pass observes includes the change that was filtered out.

A :class:`Predicate` answers per event type: ``create``, ``update`` and ``delete`` for an
informer's events, ``generic`` for the events of a :mod:`~pkg.framework.controller.source` (a
timer, a uevent, a signal, a channel). :class:`Funcs` builds one from plain callables; a missing
callable lets its events through. Each controller's watches declare their own predicates next to
the watch (``internal/watch/``), where the reason for dropping an event is written down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Predicate(Protocol):
    """Decides, per event, whether it should be turned into requests."""

    def create(self, obj: Any) -> bool: ...

    def update(self, old: Any, new: Any) -> bool: ...

    def delete(self, obj: Any) -> bool: ...

    def generic(self, obj: Any) -> bool: ...


class Funcs:
    """A predicate from callables; a missing callable lets its events through."""

    def __init__(
        self,
        *,
        create: Callable[[Any], bool] | None = None,
        update: Callable[[Any, Any], bool] | None = None,
        delete: Callable[[Any], bool] | None = None,
        generic: Callable[[Any], bool] | None = None,
    ) -> None:
        self._create = create
        self._update = update
        self._delete = delete
        self._generic = generic

    def create(self, obj: Any) -> bool:
        return self._create is None or self._create(obj)

    def update(self, old: Any, new: Any) -> bool:
        return self._update is None or self._update(old, new)

    def delete(self, obj: Any) -> bool:
        return self._delete is None or self._delete(obj)

    def generic(self, obj: Any) -> bool:
        return self._generic is None or self._generic(obj)


__all__ = ["Funcs", "Predicate"]
