"""Reflector: keeps a store in step with the API server by list + watch (client-go's ``Reflector``).

One cycle, run by :meth:`Reflector.run` until ``stop`` is set:

1. **List** in pages of ``page_size``, following continue tokens. The first page is read with no
   resourceVersion (a consistent read), so every page belongs to one snapshot. If a continue token
   expires (410) mid-list, the pages read so far are dropped and the list restarts from the first
   page: stitching two snapshots together would lose or duplicate objects.
2. ``store.replace(items, list_resource_version)``.
3. **Watch** from the last synced resourceVersion with bookmarks. Every event, BOOKMARK included,
   advances :attr:`last_sync_resource_version`, so a resume starts after the newest point the
   server confirmed, even on a quiet kind whose objects never change.
4. The watch ends normally (the server's ``timeoutSeconds``, randomized in [min, 2 * min) for
   ``min_watch_timeout_seconds``, 5 minutes by default, as in client-go, so that many informers do
   not reconnect in lockstep) or with ``WatchStreamClosedError`` (silence past ``read_timeout``, a
   broken connection): watch again from the last resourceVersion, **without** re-listing.
5. ``GoneError`` from the watch (the resourceVersion was compacted away): back to 1.
6. Any other error, or a watch that ended within a second without a single event (client-go's
   "very short watch"): sleep with exponential backoff (0.8 s doubling to 30 s, jittered), reset
   after a healthy watch, then retry the step that failed.

Stopping. The watch iterator does not expose its HTTP response, so a read blocked inside it cannot
be interrupted from another thread, and closing a generator that another thread is running is not
allowed. The reflector therefore relies on the read timeout: ``stop`` is checked before each store
write and after each event or wake-up, so :meth:`run` returns at the latest ``read_timeout`` after
``stop`` (the server's bookmarks, about one a minute, and any event wake it sooner), and nothing is
written to the store once ``stop`` is seen. :class:`~pkg.framework.cache.informer.SharedInformer` runs
the reflector in a daemon thread so that its own ``run`` returns within a second.

Read barrier. :meth:`Reflector.wait_for_resource_version` blocks until the store holds everything up
to a resourceVersion the caller got from the API server (client-go has no such call; controllers that
need "my cache has caught up with X" build it on ``LastSyncResourceVersion``). The last synced
resourceVersion only ever moves after the store write it stands for, so once it reaches X every
event up to X is in the store. resourceVersions are opaque to clients in general; the barrier
compares them as integers (what etcd-backed servers hand out) and answers False at once for any
that is not, so a caller falls back to a consistent read instead of waiting on a guess.

Projection. ``transform`` maps each raw object (list item or watch event) before it is decoded, like
client-go's ``SetTransform`` but ahead of the decoding: a controller that needs a few fields of a
large kind (Pods) keeps only those, so neither the decode nor the cache pays for the rest.
``object_transform`` maps each decoded object before it is stored (client-go's ``SetTransform``
itself): a controller that needs every field of a kind whose objects repeat the same values (the
devices of identical servers) can make them share one instance of each, which no projection of the
raw form can, because decoding builds new instances.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel, ValidationError

from pkg.framework.client import GoneError, ListPage, ResourceKind, WatchEvent, WatchEventType
from pkg.framework.client.watch import WatchStreamClosedError

ModelT = TypeVar("ModelT", bound=BaseModel)
ObjT_contra = TypeVar("ObjT_contra", contravariant=True)

logger = logging.getLogger(__name__)

MIN_WATCH_TIMEOUT_SECONDS = 300
SHORT_WATCH_SECONDS = 1.0
LIST_RESTARTS = 2
"""How often an expired continue token restarts the list before the failure is backed off."""

RawTransform = Callable[[dict[str, Any]], dict[str, Any]]
"""Maps a raw object (JSON as a dict) to the part of it to decode and store."""
ObjectTransform = Callable[[Any], Any]
"""Maps a freshly decoded object (no one else holds it yet) to the object to store."""

SleepFunc = Callable[[threading.Event, float], bool]
"""Waits ``seconds`` unless ``stop`` is set first; returns True when stopped (``Event.wait``)."""


class ShortWatchError(Exception):
    """A watch ended within a second without an event: something is wrong, so back off."""


class Backoff:
    """Exponential backoff: ``initial`` seconds, times ``factor`` per failure, at most ``cap``.

    Each delay is shortened by a random fraction of up to ``jitter``, so that reflectors failing
    together (an API server restart) do not retry in lockstep, while no delay exceeds ``cap``.
    """

    def __init__(
        self,
        *,
        initial: float = 0.8,
        factor: float = 2.0,
        cap: float = 30.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        self._initial, self._factor, self._cap, self._jitter = initial, factor, cap, jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next_delay(self) -> float:
        base = min(self._current, self._cap)
        self._current = min(base * self._factor, self._cap)
        return base * (1.0 - self._jitter * self._rng.random())

    def reset(self) -> None:
        """Called after a healthy watch: the next failure waits ``initial`` again."""
        self._current = self._initial


class ListerWatcher(Protocol):
    """The two calls the reflector makes (:class:`~pkg.framework.client.KubeClient` provides them)."""

    def list_page(
        self,
        kind: ResourceKind[Any],
        *,
        namespace: str | None = ...,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        limit: int = ...,
        continue_token: str | None = ...,
        resource_version: str | None = ...,
    ) -> ListPage: ...

    def watch(
        self,
        kind: ResourceKind[Any],
        *,
        resource_version: str,
        namespace: str | None = ...,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        timeout_seconds: int = ...,
        read_timeout: float = ...,
    ) -> Iterator[WatchEvent]: ...


class ReflectorStore(Protocol[ObjT_contra]):
    """Where the reflector writes (client-go's ``Store`` as seen by a Reflector)."""

    def add(self, obj: ObjT_contra) -> None: ...

    def update(self, obj: ObjT_contra) -> None: ...

    def delete(self, obj: ObjT_contra) -> None: ...

    def replace(self, objs: Sequence[ObjT_contra], resource_version: str) -> None: ...


class Reflector(Generic[ModelT]):
    """Lists and watches one kind (optionally one namespace and selectors) into a store."""

    def __init__(
        self,
        *,
        client: ListerWatcher,
        kind: ResourceKind[ModelT],
        store: ReflectorStore[ModelT],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        read_timeout: float = 90.0,
        min_watch_timeout_seconds: int = MIN_WATCH_TIMEOUT_SECONDS,
        backoff: Backoff | None = None,
        sleep: SleepFunc = threading.Event.wait,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        transform: RawTransform | None = None,
        object_transform: ObjectTransform | None = None,
    ) -> None:
        self._client = client
        self._transform = transform
        self._object_transform = object_transform
        self._kind = kind
        self._store = store
        self._scope: dict[str, Any] = {
            "namespace": namespace,
            "label_selector": label_selector,
            "field_selector": field_selector,
        }
        self._page_size = page_size
        self._read_timeout = read_timeout
        # client-go's MinWatchTimeout; the server also sends a bookmark 2 s before the timeout.
        self._min_watch_timeout = min_watch_timeout_seconds
        self._rng = rng or random.Random()
        self._backoff = backoff or Backoff(rng=self._rng)
        self._sleep = sleep
        self._clock = clock
        self._last_rv = ""
        self._rv_changed = threading.Condition()
        self.name = f"reflector-{kind.kind.lower()}"
        self._log_extra = {"kind": str(kind), "namespace": namespace or "", "selector": label_selector}

    @property
    def last_sync_resource_version(self) -> str:
        """The newest resourceVersion seen: of the last list, event or bookmark ("" before any)."""
        return self._last_rv

    def wait_for_resource_version(self, resource_version: str, timeout: float) -> bool:
        """Whether the store holds every change up to ``resource_version`` within ``timeout`` seconds.

        False at once when either version is not an integer (see the module docs), and on timeout:
        the caller decides what a late cache costs (typically a consistent read instead)."""
        target = _as_int(resource_version)
        if target is None:
            return False
        deadline = time.monotonic() + timeout  # real time: the condition waits in real time
        with self._rv_changed:
            while True:
                current = _as_int(self._last_rv)
                if current is not None and current >= target:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (current is None and self._last_rv):
                    return False
                self._rv_changed.wait(remaining)

    def _set_last_rv(self, resource_version: str) -> None:
        with self._rv_changed:
            self._last_rv = resource_version
            self._rv_changed.notify_all()

    def run(self, stop: threading.Event) -> None:
        """Lists, then watches and resumes, until ``stop``; errors are logged and retried."""
        need_list = True
        while not stop.is_set():
            error: Exception
            try:
                if need_list:
                    self._list_and_replace(stop)
                    need_list = False
                else:
                    self._watch(stop)
                    self._backoff.reset()
                continue
            except GoneError as exc:
                if not need_list:
                    logger.info("resourceVersion expired; re-listing", extra=self._extra(error=str(exc)))
                    need_list = True
                    continue
                error = exc
            except Exception as exc:
                error = exc
            step = "list" if need_list else "watch"
            delay = self._backoff.next_delay()
            extra = self._extra(error=str(error), step=step, delay=delay)
            logger.warning("%s failed; retrying after %.1fs", step, delay, exc_info=error, extra=extra)
            if self._sleep(stop, delay):
                return

    # -- list ------------------------------------------------------------------------------------

    def _list_and_replace(self, stop: threading.Event) -> None:
        listed = self._list(stop)
        if listed is None or stop.is_set():
            return
        items, resource_version = listed
        self._store.replace(items, resource_version)
        self._set_last_rv(resource_version)
        logger.info("listed", extra=self._extra(count=len(items)))

    def _list(self, stop: threading.Event) -> tuple[list[ModelT], str] | None:
        """All pages of one snapshot, or None when stopped."""
        items: list[ModelT] = []
        token: str | None = None
        restarts = 0
        while not stop.is_set():
            try:
                page = self._client.list_page(
                    self._kind, limit=self._page_size, continue_token=token, **self._scope
                )
            except GoneError:
                if token is None or restarts == LIST_RESTARTS:
                    raise
                logger.info("continue token expired; restarting the list", extra=self._extra())
                restarts += 1
                items, token = [], None
                continue
            items.extend(obj for raw in page.items if (obj := self._decode(raw)) is not None)
            if not page.continue_token:
                return items, page.resource_version
            token = page.continue_token
        return None

    # -- watch -----------------------------------------------------------------------------------

    def _watch(self, stop: threading.Event) -> None:
        """One watch from the last resourceVersion, until it ends or ``stop``."""
        started = self._clock()
        received = False
        timeout_seconds = int(self._min_watch_timeout * (1.0 + self._rng.random()))
        events = self._client.watch(
            self._kind,
            resource_version=self._last_rv,
            timeout_seconds=timeout_seconds,
            read_timeout=self._read_timeout,
            **self._scope,
        )
        try:
            for event in events:
                if stop.is_set():
                    return
                received = True
                self._apply(event)
        except WatchStreamClosedError as exc:
            logger.info("watch stream closed; resuming", extra=self._extra(error=str(exc)))
        finally:
            if isinstance(events, Generator):
                events.close()  # releases the connection back to the pool
        if not received and not stop.is_set() and self._clock() - started < SHORT_WATCH_SECONDS:
            raise ShortWatchError(f"watch from resourceVersion {self._last_rv!r} ended at once, no events")

    def _apply(self, event: WatchEvent) -> None:
        if event.type is not WatchEventType.BOOKMARK:
            obj = self._decode(event.raw)
            if obj is not None:
                if event.type is WatchEventType.ADDED:
                    self._store.add(obj)
                elif event.type is WatchEventType.MODIFIED:
                    self._store.update(obj)
                else:
                    self._store.delete(obj)
        if event.resource_version:
            self._set_last_rv(event.resource_version)

    def _decode(self, raw: dict[str, Any]) -> ModelT | None:
        # One malformed object must not blind the whole informer: it is logged and skipped.
        try:
            obj = self._kind.decode(raw if self._transform is None else self._transform(raw))
        except ValidationError as exc:
            name = (raw.get("metadata") or {}).get("name")
            logger.error("cannot decode object; skipped", extra=self._extra(object_name=name, error=str(exc)))
            return None
        return obj if self._object_transform is None else cast(ModelT, self._object_transform(obj))

    def _extra(self, **fields: Any) -> dict[str, Any]:
        return {**self._log_extra, "resource_version": self._last_rv, **fields}


def _as_int(resource_version: str) -> int | None:
    try:
        return int(resource_version)
    except ValueError:
        return None
