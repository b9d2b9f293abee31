"""Predicates: which events are worth a reconcile (controller-runtime's ``predicate`` package).

An informer reports every change of an object, including the ones a controller does not care
about: a status write bumps ``resourceVersion`` but not ``generation``, so a controller that acts
on the spec would wake itself up with its own status writes. A predicate drops such events
*before* they reach the queue. Dropping an event is safe only because reconcilers are
level-based: whatever a later pass observes includes the change that was filtered out.

A :class:`Predicate` answers per event type. The built-in ones filter updates only and let every
create and delete through (a new or vanished object always deserves a look). :func:`and_` and
:func:`or_` combine predicates; :class:`Funcs` builds one from plain callables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Predicate(Protocol):
    """Decides, per event, whether it should be turned into requests."""

    def create(self, obj: Any) -> bool: ...

    def update(self, old: Any, new: Any) -> bool: ...

    def delete(self, obj: Any) -> bool: ...


class Funcs:
    """A predicate from callables; a missing callable lets its events through."""

    def __init__(
        self,
        *,
        create: Callable[[Any], bool] | None = None,
        update: Callable[[Any, Any], bool] | None = None,
        delete: Callable[[Any], bool] | None = None,
    ) -> None:
        self._create = create
        self._update = update
        self._delete = delete

    def create(self, obj: Any) -> bool:
        return self._create is None or self._create(obj)

    def update(self, old: Any, new: Any) -> bool:
        return self._update is None or self._update(old, new)

    def delete(self, obj: Any) -> bool:
        return self._delete is None or self._delete(obj)


class _UpdateOnly:
    """Base of the built-ins: creates and deletes always pass; subclasses judge updates."""

    def create(self, obj: Any) -> bool:
        return True

    def delete(self, obj: Any) -> bool:
        return True


class GenerationChangedPredicate(_UpdateOnly):
    """Passes updates that changed ``metadata.generation``, i.e. the spec (not status or metadata)."""

    def update(self, old: Any, new: Any) -> bool:
        return bool(old.metadata.generation != new.metadata.generation)


class LabelChangedPredicate(_UpdateOnly):
    """Passes updates that changed ``metadata.labels`` (missing and empty labels are the same)."""

    def update(self, old: Any, new: Any) -> bool:
        return (old.metadata.labels or {}) != (new.metadata.labels or {})


class ResourceVersionChangedPredicate(_UpdateOnly):
    """Passes updates whose ``resourceVersion`` changed: drops the periodic resync's no-op updates."""

    def update(self, old: Any, new: Any) -> bool:
        return bool(old.metadata.resource_version != new.metadata.resource_version)


class _All:
    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self._predicates = predicates

    def create(self, obj: Any) -> bool:
        return all(p.create(obj) for p in self._predicates)

    def update(self, old: Any, new: Any) -> bool:
        return all(p.update(old, new) for p in self._predicates)

    def delete(self, obj: Any) -> bool:
        return all(p.delete(obj) for p in self._predicates)


class _Any:
    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self._predicates = predicates

    def create(self, obj: Any) -> bool:
        return any(p.create(obj) for p in self._predicates)

    def update(self, old: Any, new: Any) -> bool:
        return any(p.update(old, new) for p in self._predicates)

    def delete(self, obj: Any) -> bool:
        return any(p.delete(obj) for p in self._predicates)


def and_(*predicates: Predicate) -> Predicate:
    """Passes an event only if every predicate passes it (all of none: everything passes)."""
    return _All(predicates)


def or_(*predicates: Predicate) -> Predicate:
    """Passes an event if any predicate passes it (any of none: nothing passes)."""
    return _Any(predicates)


__all__ = [
    "Funcs",
    "GenerationChangedPredicate",
    "LabelChangedPredicate",
    "Predicate",
    "ResourceVersionChangedPredicate",
    "and_",
    "or_",
]
