"""SharedInformer: one list+watch of a kind, a store, and any number of listeners.

Threads, and why there are three:

- the **reflector thread** lists and watches (:mod:`pkg.framework.cache.reflector`) and writes through
  :class:`_DeltaStore`, which compares each write with the store (client-go's DeltaFIFO and
  ``processDeltas`` folded into one step), applies it and enqueues the resulting notification;
- the **dispatch thread** pops notifications from an unbounded queue and calls the listeners, so
  the watch never waits for a listener: a slow listener delays only later notifications, and the
  store (which controllers read) stays current meanwhile;
- the thread calling :meth:`SharedInformer.run` waits for ``stop`` and fires periodic resyncs.

Ordering: every store write and the enqueueing of its notification happen under one lock, so the
queue holds notifications in store order. Registering a listener takes the same lock, snapshots the
store and enqueues the registration; the dispatch thread delivers the snapshot as adds and then
adds the listener to its list (which only it touches), so a late listener sees the current objects
and then exactly the changes after them: no gap, no duplicate. A listener that raises is logged
and dispatch goes on.

Deltas: a watch ADDED of a known object is an update; a MODIFIED of an unknown one an add; a
DELETED of an unknown one is dropped. A re-list yields updates for objects it still finds (even if
unchanged, as in client-go), adds for new ones and, for objects gone while the watch was away,
deletes wrapped in :class:`DeletedFinalStateUnknown` holding the last state the store had.

``has_synced()`` becomes true when the dispatch thread reaches a marker queued right after the
first list's notifications, i.e. once the first list is in the store *and* every initial add has
been delivered to the listeners registered by then.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from pkg.framework.cache.listener import DeletedFinalStateUnknown, ResourceListener
from pkg.framework.cache.reflector import (
    MIN_WATCH_TIMEOUT_SECONDS,
    ListerWatcher,
    ObjectTransform,
    RawTransform,
    Reflector,
)
from pkg.framework.cache.store import Indexers, Store
from pkg.framework.client import ResourceKind
from pkg.framework.keys import object_key

ModelT = TypeVar("ModelT", bound=BaseModel)

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 1.0
"""How long ``run`` waits for its threads after ``stop``; they are daemons and end on their own."""


@dataclass(frozen=True)
class _Notification:
    """One queued call for every listener: ``call(listener)``; ``what`` names it in logs."""

    what: str
    call: Callable[[ResourceListener[Any]], None]


@dataclass(frozen=True)
class _Register:
    listener: ResourceListener[Any]
    snapshot: list[Any]


_SYNCED = object()
_STOP = object()


class SharedInformer(Generic[ModelT]):
    """Watches one kind (optionally one namespace and selectors) for many listeners. A Runnable."""

    needs_leader_election = False

    def __init__(
        self,
        *,
        client: ListerWatcher,
        kind: ResourceKind[ModelT],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float | None = None,
        indexers: Indexers | None = None,
        page_size: int = 500,
        read_timeout: float = 90.0,
        min_watch_timeout_seconds: int = MIN_WATCH_TIMEOUT_SECONDS,
        transform: RawTransform | None = None,
        object_transform: ObjectTransform | None = None,
    ) -> None:
        scope = "".join(f"[{part}]" for part in (namespace, label_selector, field_selector) if part)
        self.name = f"informer-{kind.kind.lower()}{scope}"  # distinct per watch, for logs and the manager
        self._kind = kind
        self._store: Store[ModelT] = Store(indexers=indexers, kind=kind.kind)
        self._resync_period = resync_period
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._listeners: list[ResourceListener[Any]] = []  # dispatch thread only
        self._listed = False
        self._synced = threading.Event()
        self._started = False
        self._reflector = Reflector(
            client=client, kind=kind, store=_DeltaStore(self), namespace=namespace,
            label_selector=label_selector, field_selector=field_selector,
            page_size=page_size, read_timeout=read_timeout,
            min_watch_timeout_seconds=min_watch_timeout_seconds, transform=transform,
            object_transform=object_transform,
        )  # fmt: skip
        self._log_extra = {"kind": str(kind), "namespace": namespace or "", "selector": label_selector}

    @property
    def kind(self) -> ResourceKind[ModelT]:
        return self._kind

    @property
    def store(self) -> Store[ModelT]:
        """The informer's cache: read freely, never mutate what it returns (copy first)."""
        return self._store

    @property
    def last_sync_resource_version(self) -> str:
        return self._reflector.last_sync_resource_version

    def wait_for_resource_version(self, resource_version: str, timeout: float) -> bool:
        """Whether the store (and its indexes) reflect every change up to ``resource_version``
        within ``timeout`` seconds; see :meth:`Reflector.wait_for_resource_version`. Listeners may
        not have been called yet: this is about the store, which is written first."""
        return self._reflector.wait_for_resource_version(resource_version, timeout)

    def add_listener(self, listener: ResourceListener[ModelT]) -> None:
        """Registers a listener, before or after start; it first gets adds for current objects."""
        with self._lock:
            self._queue.put(_Register(listener, self._store.list()))

    def add_indexers(self, indexers: Indexers) -> None:
        self._store.add_indexers(indexers)

    def ensure_indexers(self, indexers: Indexers) -> None:
        """Adds those of ``indexers`` the store does not have yet. Idempotent, so every controller's
        setup can declare the indexes it reads without knowing whether another one in the process
        (sharing this informer) already did. Names are assumed to mean one function each."""
        existing = self._store.get_indexers()
        missing = {name: fn for name, fn in indexers.items() if name not in existing}
        if missing:
            self._store.add_indexers(missing)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def run(self, stop: threading.Event) -> None:
        """Starts the reflector and dispatch threads; blocks until ``stop``, resyncing meanwhile."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"{self.name} already started")
            self._started = True
        threads = [
            threading.Thread(target=self._dispatch, args=(stop,), name=f"{self.name}-dispatch", daemon=True),
            threading.Thread(
                target=self._reflector.run, args=(stop,), name=self._reflector.name, daemon=True
            ),
        ]
        for thread in threads:
            thread.start()
        logger.info("informer started", extra=self._log_extra)
        try:
            # Without a resync period this is a plain wait for stop.
            while not stop.wait(self._resync_period):
                self._resync()
        finally:
            self._queue.put(_STOP)  # wakes the dispatch thread if it is idle
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            logger.info("informer stopped", extra=self._log_extra)

    # -- producer side (reflector thread, resync) ------------------------------------------------

    def _enqueue(self, what: str, call: Callable[[ResourceListener[Any]], None]) -> None:
        self._queue.put(_Notification(what, call))

    def _resync(self) -> None:
        with self._lock:
            for obj in self._store.list():
                self._enqueue("resync", _updated(obj, obj))

    # -- consumer side (dispatch thread) ---------------------------------------------------------

    def _dispatch(self, stop: threading.Event) -> None:
        while not stop.is_set():
            item = self._queue.get()
            if item is _STOP or stop.is_set():
                return
            if item is _SYNCED:
                self._synced.set()
                logger.info("informer synced", extra=self._log_extra)
            elif isinstance(item, _Register):
                for obj in item.snapshot:
                    self._call(item.listener, "add", _added(obj, initial=True))
                self._listeners.append(item.listener)
            elif isinstance(item, _Notification):
                for listener in self._listeners:
                    self._call(listener, item.what, item.call)

    def _call(
        self, listener: ResourceListener[Any], what: str, call: Callable[[ResourceListener[Any]], None]
    ) -> None:
        try:
            call(listener)
        except Exception as exc:
            # The message and the field keep their historical wording ("handler"): log queries use them.
            extra = {**self._log_extra, "handler": repr(listener), "notification": what}
            logger.error("event handler failed: %s", exc, exc_info=exc, extra=extra)


def _added(obj: Any, *, initial: bool) -> Callable[[ResourceListener[Any]], None]:
    return lambda listener: listener.on_add(obj, is_in_initial_list=initial)


def _updated(old: Any, new: Any) -> Callable[[ResourceListener[Any]], None]:
    return lambda listener: listener.on_update(old, new)


def _deleted(obj: Any) -> Callable[[ResourceListener[Any]], None]:
    return lambda listener: listener.on_delete(obj)


class _DeltaStore(Generic[ModelT]):
    """What the reflector writes to: applies each change to the store and queues its notification."""

    def __init__(self, informer: SharedInformer[ModelT]) -> None:
        self._informer = informer
        self._store = informer._store

    def add(self, obj: ModelT) -> None:
        with self._informer._lock:
            old = self._store.get(obj)
            self._store.update(obj)
            if old is None:
                self._informer._enqueue("add", _added(obj, initial=False))
            else:
                self._informer._enqueue("update", _updated(old, obj))

    def update(self, obj: ModelT) -> None:
        self.add(obj)

    def delete(self, obj: ModelT) -> None:
        with self._informer._lock:
            if self._store.get(obj) is None:
                return
            self._store.delete(obj)
            self._informer._enqueue("delete", _deleted(obj))

    def replace(self, objs: Sequence[ModelT], resource_version: str) -> None:
        informer = self._informer
        with informer._lock:
            initial = not informer._listed
            fresh = {object_key(obj): obj for obj in objs}
            for key in self._store.list_keys():
                old = self._store.get_by_key(key)
                if key not in fresh and old is not None:
                    informer._enqueue("delete", _deleted(DeletedFinalStateUnknown(key, old)))
            for key, obj in fresh.items():
                old = self._store.get_by_key(key)
                if old is None:
                    informer._enqueue("add", _added(obj, initial=initial))
                else:
                    informer._enqueue("update", _updated(old, obj))
            self._store.replace(objs, resource_version)
            if initial:
                informer._listed = True
                informer._queue.put(_SYNCED)
