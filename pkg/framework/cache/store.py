"""A thread-safe object store with named indexes (client-go's ``ThreadSafeStore`` + ``Indexer``).

The informer's reflector thread writes; controllers' worker threads read. One lock guards the items
and every index, and each operation holds it only for a dictionary update or a copy of a list, so
readers never wait behind the network and never see an object without its index entries.

Objects are immutable snapshots. The store hands out the very objects it holds (no copy per read, as
in client-go); a caller that wants to change one must ``obj.model_copy(deep=True)`` first, otherwise
it silently changes the cache every other controller reads. For the same reason index values are
remembered per key when an object is stored, and removal uses those remembered values rather than
re-running the index function on the old object: the indexes stay right even if someone did
mutate a cached object in place.

Invariants (tested): after ``update`` an object is found only under its new index values; after
``delete`` under none; an index value with no objects left is dropped, so ``list_index_values``
never returns empty buckets; ``add_indexers`` works before and after data arrives and indexes the
objects already held; a raising index function leaves the store unchanged.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from pkg.framework.keys import object_key

ObjT = TypeVar("ObjT")

IndexFunc = Callable[[Any], list[str]]
"""Maps an object to the index values it is filed under (none, one or several)."""
Indexers = dict[str, IndexFunc]
KeyFunc = Callable[[Any], str]

NAMESPACE_INDEX = "namespace"


def namespace_index(obj: Any) -> list[str]:
    """client-go's ``MetaNamespaceIndexFunc``: the namespace, ``""`` for cluster-scoped objects."""
    return [obj.metadata.namespace or ""]


def label_index(label: str) -> IndexFunc:
    """An index by one label's value (e.g. PhysicalGPUs by ``gpu.deckhouse.io/node``).

    Objects without the label are not indexed, so ``by_index`` never confuses "absent" with "".
    """

    def index(obj: Any) -> list[str]:
        value = (obj.metadata.labels or {}).get(label)
        return [] if value is None else [value]

    return index


class IndexNotFoundError(KeyError):
    """A lookup named an index that was never added: an error, not an empty answer, because "no
    object is filed there" would read as "nothing references this" and silently stop a wake-up."""

    def __init__(self, index_name: str, kind: str = "") -> None:
        super().__init__(index_name)
        self.index_name = index_name
        self.kind = kind

    def __str__(self) -> str:
        of = f" of {self.kind}" if self.kind else ""
        return (
            f"index {self.index_name!r}{of} was never declared: declare it in the manager's "
            "index registry (pkg.framework.cache.indexer) before the caches start"
        )


class Store(Generic[ObjT]):
    """Objects by key (``namespace/name``) plus named indexes; safe to share between threads."""

    def __init__(
        self, *, key_func: KeyFunc = object_key, indexers: Indexers | None = None, kind: str = ""
    ) -> None:
        self._key_func = key_func
        self._kind = kind  # names the store in errors
        self._lock = threading.Lock()
        self._items: dict[str, ObjT] = {}
        self._indexers: Indexers = {}
        # index name -> index value -> keys; and key -> index name -> the values it was filed under.
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._filed: dict[str, dict[str, list[str]]] = {}
        self._resource_version = ""
        self.add_indexers(indexers or {})

    # -- writes ----------------------------------------------------------------------------------

    def add(self, obj: ObjT) -> None:
        self.update(obj)

    def update(self, obj: ObjT) -> None:
        key = self._key_func(obj)
        with self._lock:
            values = self._index_values(obj, self._indexers)
            self._unfile(key)
            self._items[key] = obj
            self._file(key, values)

    def delete(self, obj: ObjT) -> None:
        self.delete_key(self._key_func(obj))

    def delete_key(self, key: str) -> None:
        with self._lock:
            if self._items.pop(key, None) is not None:
                self._unfile(key)

    def replace(self, objs: Iterable[ObjT], resource_version: str) -> None:
        """Swaps the whole content for ``objs`` (a fresh list) and rebuilds every index."""
        items = {self._key_func(obj): obj for obj in objs}
        with self._lock:
            filed = {key: self._index_values(obj, self._indexers) for key, obj in items.items()}
            self._items = items
            self._indices = {name: {} for name in self._indexers}
            self._filed = {}
            for key, values in filed.items():
                self._file(key, values)
            self._resource_version = resource_version

    def add_indexers(self, indexers: Indexers) -> None:
        """Adds indexes; objects already stored are indexed at once. Names must be new."""
        with self._lock:
            clash = sorted(set(indexers) & set(self._indexers))
            if clash:
                raise ValueError(f"indexer conflict: {clash} already registered")
            computed = {key: self._index_values(obj, indexers) for key, obj in self._items.items()}
            self._indexers.update(indexers)
            for name in indexers:
                self._indices[name] = {}
            for key, values in computed.items():
                self._file(key, values)

    # -- reads -----------------------------------------------------------------------------------

    def get_by_key(self, key: str) -> ObjT | None:
        with self._lock:
            return self._items.get(key)

    def get(self, obj: ObjT) -> ObjT | None:
        return self.get_by_key(self._key_func(obj))

    # Below this method, a bare ``list`` in an annotation would name it: hence ``builtins.list``.
    def list(self) -> list[ObjT]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the list last passed to :meth:`replace` ("" before the first)."""
        with self._lock:
            return self._resource_version

    def get_indexers(self) -> Indexers:
        with self._lock:
            return dict(self._indexers)

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """Keys filed under ``value`` in ``index_name``, sorted."""
        with self._lock:
            return sorted(self._index(index_name).get(value, ()))

    def by_index(self, index_name: str, value: str) -> builtins.list[ObjT]:
        """Objects filed under ``value`` in ``index_name``, in key order."""
        with self._lock:
            keys = sorted(self._index(index_name).get(value, ()))
            return [self._items[key] for key in keys]

    def index(self, index_name: str, obj: ObjT) -> builtins.list[ObjT]:
        """Objects sharing at least one of ``obj``'s values in ``index_name`` (client-go ``Index``)."""
        with self._lock:
            index = self._index(index_name)
            keys: set[str] = set()
            for value in self._indexers[index_name](obj):
                keys |= index.get(value, set())
            return [self._items[key] for key in sorted(keys)]

    def list_index_values(self, index_name: str) -> builtins.list[str]:
        """Every value that currently has at least one object, sorted."""
        with self._lock:
            return sorted(self._index(index_name))

    # -- internals (caller holds the lock) -------------------------------------------------------

    def _index(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise IndexNotFoundError(index_name, self._kind) from None

    @staticmethod
    def _index_values(obj: ObjT, indexers: Indexers) -> dict[str, builtins.list[str]]:
        # Computed before any mutation, so an index function that raises changes nothing.
        return {name: list(func(obj)) for name, func in indexers.items()}

    def _file(self, key: str, values: dict[str, builtins.list[str]]) -> None:
        self._filed.setdefault(key, {}).update(values)
        for name, index_values in values.items():
            for value in index_values:
                self._indices[name].setdefault(value, set()).add(key)

    def _unfile(self, key: str) -> None:
        for name, index_values in self._filed.pop(key, {}).items():
            bucket_map = self._indices[name]
            for value in index_values:
                bucket = bucket_map.get(value)
                if bucket is None:
                    continue
                bucket.discard(key)
                if not bucket:
                    del bucket_map[value]
