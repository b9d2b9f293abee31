"""The index registry: every store index of a process declared once, added before the caches start.

controller-runtime's answer to "which objects reference X" is a field index: a setup function
calls ``mgr.GetFieldIndexer().IndexField(ctx, &Pod{}, "spec.nodeName", extract)`` before the
manager starts the caches, and a reconciler lists by that field later. This module is our
counterpart, in three parts:

* :class:`Index` names one index: its ``name``, the ``kind`` of object it files and the function
  computing the values an object is filed under. A component declares its indexes as module
  constants next to their functions (``internal/indexes.py``), so the name a lookup uses and the
  function that fills it cannot drift apart.
* :class:`IndexRegistry` (the manager's ``indexes``) collects what the setup modules declare
  (``manager.indexes.declare(*INDEXES)``: the analogue of a list of ``IndexGetters`` walked by an
  ``IndexALL``). Declaring the same index twice is harmless, since two controllers may read one
  index; declaring a name again with another function is refused, because two controllers would
  otherwise read each other's answers under one name.
* :meth:`IndexRegistry.index_all` adds every declared index to each informer of its kind. The
  manager calls it once, right before it starts the caches, so no index is ever built on a store
  that is already being filled and read, and a declaration after that point is refused loudly
  rather than left unapplied.

A lookup by an index nobody declared raises
:class:`~pkg.framework.cache.store.IndexNotFoundError` naming the index and the kind: an empty
answer would look exactly like "nothing references this" and silently stop a controller waking.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pkg.framework.cache.store import Indexers
from pkg.framework.client import ResourceKind

ObjT = TypeVar("ObjT")


@dataclass(frozen=True)
class Index(Generic[ObjT]):
    """One named index of one kind: ``func`` maps an object to the values it is filed under."""

    name: str
    kind: ResourceKind[Any]
    func: Callable[[ObjT], list[str]]

    def __str__(self) -> str:
        return f"index {self.name!r} of {self.kind.kind}"


def indexers_of(indexes: Iterable[Index[Any]]) -> Indexers:
    """The store-level ``{name: function}`` of ``indexes`` (a :class:`Store` built by hand in a test
    or a tool gets exactly what the registry would add)."""
    return {index.name: index.func for index in indexes}


@runtime_checkable
class IndexedInformer(Protocol):
    """What the registry needs of an informer: its kind, and a way to add indexes to its store."""

    @property
    def kind(self) -> ResourceKind[Any]: ...

    def ensure_indexers(self, indexers: Indexers) -> None: ...


class IndexRegistry:
    """The indexes a process's controllers read, by kind; applied once, before the caches start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[tuple[ResourceKind[Any], str], Index[Any]] = {}
        self._applied = False

    def declare(self, *indexes: Index[Any]) -> None:
        """Adds ``indexes``; the same index again is a no-op, the same name with another function an
        error. Refused once :meth:`index_all` ran: the caches are filling and would never get it."""
        with self._lock:
            if self._applied:
                names = ", ".join(str(index) for index in indexes)
                raise RuntimeError(f"cannot declare {names}: the caches have started")
            for index in indexes:
                known = self._indexes.get((index.kind, index.name))
                if known is not None and known.func is not index.func:
                    raise ValueError(
                        f"{index} is already declared with another function "
                        f"({_describe(known.func)}, not {_describe(index.func)})"
                    )
                self._indexes[(index.kind, index.name)] = index

    def of_kind(self, kind: ResourceKind[Any]) -> Indexers:
        """The declared indexes of ``kind`` as the store's ``{name: function}``."""
        with self._lock:
            return indexers_of(index for (k, _), index in self._indexes.items() if k == kind)

    def declared(self) -> list[Index[Any]]:
        with self._lock:
            return sorted(self._indexes.values(), key=lambda i: (i.kind.kind, i.name))

    def index_all(self, informers: Iterable[IndexedInformer]) -> None:
        """Adds to every informer the declared indexes of its kind, then closes the registry."""
        with self._lock:
            self._applied = True
            if not self._indexes:
                return
        for informer in informers:
            indexers = self.of_kind(informer.kind)
            if indexers:
                informer.ensure_indexers(indexers)


def _describe(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__qualname__", repr(func)))


__all__ = ["Index", "IndexRegistry", "IndexedInformer", "indexers_of"]
