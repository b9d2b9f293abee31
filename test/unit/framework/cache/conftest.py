"""Fixtures for the informer machinery: an in-memory list/watch endpoint and a recording listener.

``FakeListWatchServer`` holds objects like an API server (a resourceVersion counter, paged lists
with continue tokens) and serves watches from a queue the test feeds: events, exceptions to raise
mid-stream, or ``END_WATCH`` for a server-side close. Nothing here sleeps; waiting is done with
conditions and events.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client import V1ConfigMap

from pkg.framework.client import GoneError, ListPage, ResourceKind, WatchEvent, WatchEventType
from pkg.framework.client.watch import WatchStreamClosedError
from pkg.framework.keys import object_key

CONFIG_MAPS: ResourceKind[V1ConfigMap] = ResourceKind(
    group="", version="v1", kind="ConfigMap", plural="configmaps", namespaced=True, model=V1ConfigMap
)
END_WATCH = object()
_CLOSED = object()


def wait_until(predicate: Callable[[], bool], timeout: float = 2.0) -> bool:
    """Polls ``predicate`` (a few ms apart) until it holds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


class FakeListWatchServer:
    """The two calls a reflector makes, answered from memory; records every call."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 100
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.list_failures: deque[Exception] = deque()
        self.watch_failures: deque[Exception] = deque()
        self.expire_continue_tokens = 0
        self._snapshots: dict[str, tuple[list[dict[str, Any]], str]] = {}
        self._tokens = itertools.count(1)
        self._events: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()

    # -- test side -------------------------------------------------------------------------------

    def put(
        self, name: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
        data: Any = None, event: bool = True,
    ) -> dict[str, Any]:  # fmt: skip
        """Creates or changes an object; ``event=False`` changes it while nobody watches."""
        with self._lock:
            self.rv += 1
            key = f"{namespace}/{name}"
            kind = WatchEventType.MODIFIED if key in self.objects else WatchEventType.ADDED
            meta = {"name": name, "namespace": namespace, "resourceVersion": str(self.rv), "labels": labels}
            raw = {"metadata": meta, "data": {"v": str(self.rv)} if data is None else data}
            self.objects[key] = raw
        if event:
            self.push(WatchEvent(type=kind, resource_version=str(self.rv), raw=raw))
        return raw

    def remove(self, name: str, *, namespace: str = "default", event: bool = True) -> None:
        with self._lock:
            self.rv += 1
            raw = self.objects.pop(f"{namespace}/{name}")
            raw = {**raw, "metadata": {**raw["metadata"], "resourceVersion": str(self.rv)}}
        if event:
            self.push(WatchEvent(type=WatchEventType.DELETED, resource_version=str(self.rv), raw=raw))

    def bookmark(self) -> str:
        with self._lock:
            self.rv += 1
            rv = str(self.rv)
        self.push(WatchEvent(type=WatchEventType.BOOKMARK, resource_version=rv, raw={"metadata": {}}))
        return rv

    def push(self, item: object) -> None:
        """Feeds the current (or next) watch: a WatchEvent or an exception to raise mid-stream."""
        self._events.put(item)

    def end_watch(self) -> None:
        """The server ends the current watch normally (its ``timeoutSeconds`` passed)."""
        self._events.put(END_WATCH)

    def wait_for_watches(self, count: int, timeout: float = 2.0) -> bool:
        return wait_until(lambda: len(self.watch_calls) >= count, timeout)

    def close(self) -> None:
        """Ends every watch, now and later, with WatchStreamClosedError (fixture teardown)."""
        self._events.put(_CLOSED)

    # -- client side -----------------------------------------------------------------------------

    def list_page(
        self, kind: ResourceKind[Any], *, namespace: str | None = None, label_selector: str | None = None,
        field_selector: str | None = None, limit: int = 500, continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListPage:  # fmt: skip
        self.list_calls.append(
            {"namespace": namespace, "label_selector": label_selector, "field_selector": field_selector,
             "limit": limit, "continue_token": continue_token, "resource_version": resource_version}
        )  # fmt: skip
        if self.list_failures:
            raise self.list_failures.popleft()
        if continue_token:
            if self.expire_continue_tokens:
                self.expire_continue_tokens -= 1
                raise GoneError(status=410, reason="Expired", message="continue token expired")
            items, rv = self._snapshots.pop(continue_token)
        else:
            with self._lock:
                items = [raw for key, raw in sorted(self.objects.items()) if _in(namespace, key)]
                rv = str(self.rv)
        page, rest = items[:limit], items[limit:]
        token = ""
        if rest:
            token = f"token-{next(self._tokens)}"
            self._snapshots[token] = (rest, rv)
        return ListPage(items=page, resource_version=rv, continue_token=token)

    def watch(
        self, kind: ResourceKind[Any], *, resource_version: str, namespace: str | None = None,
        label_selector: str | None = None, field_selector: str | None = None,
        timeout_seconds: int = 300, read_timeout: float = 90.0,
    ) -> Iterator[WatchEvent]:  # fmt: skip
        self.watch_calls.append(
            {"resource_version": resource_version, "namespace": namespace, "label_selector": label_selector,
             "field_selector": field_selector, "timeout_seconds": timeout_seconds,
             "read_timeout": read_timeout}
        )  # fmt: skip
        if self.watch_failures:
            raise self.watch_failures.popleft()
        return self._stream()

    def _stream(self) -> Iterator[WatchEvent]:
        while True:
            item = self._events.get()
            if item is END_WATCH:
                return
            if item is _CLOSED:
                self._events.put(_CLOSED)
                raise WatchStreamClosedError("fake server closed")
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, WatchEvent)
            yield item


def _in(namespace: str | None, key: str) -> bool:
    return not namespace or key.startswith(f"{namespace}/")


class RecordingListener:
    """Records every notification as a tuple; ``block`` makes on_add wait (a slow listener)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.block: threading.Event | None = None
        self.blocked = threading.Event()

    def on_add(self, obj: Any, *, is_in_initial_list: bool) -> None:
        if self.block is not None:
            self.blocked.set()
            self.block.wait(5)
        self.events.append(("add", object_key(obj), is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self.events.append(
            ("update", object_key(new), old.metadata.resource_version, new.metadata.resource_version)
        )

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", getattr(obj, "key", None) or object_key(obj), type(obj).__name__))

    def wait_for(self, count: int, timeout: float = 2.0) -> bool:
        return wait_until(lambda: len(self.events) >= count, timeout)


@pytest.fixture
def informer_kind() -> ResourceKind[V1ConfigMap]:
    return CONFIG_MAPS


@pytest.fixture
def informer_wait_until() -> Callable[..., bool]:
    return wait_until


@pytest.fixture
def informer_listener_factory() -> Callable[[], RecordingListener]:
    return RecordingListener


@pytest.fixture
def informer_fake_server() -> Iterator[FakeListWatchServer]:
    server = FakeListWatchServer()
    yield server
    server.close()


@pytest.fixture
def informer_stop() -> Iterator[threading.Event]:
    """A stop event set at teardown, before the fake server closes its watches."""
    stop = threading.Event()
    yield stop
    stop.set()


@pytest.fixture
def informer_run_thread(
    informer_stop: threading.Event, informer_fake_server: FakeListWatchServer
) -> Iterator[Callable[[Callable[[threading.Event], None]], threading.Thread]]:
    """Starts ``run(stop)`` in a daemon thread; teardown stops it and checks that it returned."""
    threads: list[threading.Thread] = []

    def start(run: Callable[[threading.Event], None]) -> threading.Thread:
        thread = threading.Thread(target=run, args=(informer_stop,), daemon=True)
        threads.append(thread)
        thread.start()
        return thread

    yield start
    informer_stop.set()
    informer_fake_server.close()  # a blocked watch read returns (as a read timeout would)
    for thread in threads:
        thread.join(3.0)
        assert not thread.is_alive(), "run(stop) did not return after stop"
