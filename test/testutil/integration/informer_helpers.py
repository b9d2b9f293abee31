"""What the informer tests need around a real SharedInformer: a client seen through a gate, a
recording listener, a running informer and a polling wait.

``ObservedClient`` wraps a real :class:`~pkg.framework.client.KubeClient` with the reflector's two calls
(``list_page`` and ``watch``). It answers nothing itself: it counts lists, records the watch events
the server sent (bookmarks included) and the errors a watch ended with, and it can hold back new
watch calls, which is how a test makes an informer "disconnected" without touching the server: the
open watch ends by its own server-side timeout, and the reflector's next watch waits at the gate
until the test releases it.

Each ``ObservedClient`` owns a fresh ``ApiClient`` (its own connection pool), so a watch stream an
informer leaves behind when it stops never shares a pooled connection with the session's ``kube``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.framework.client import GoneError, KubeClient, ListPage, ResourceKind, WatchEvent
from pkg.framework.client.config import new_api_client
from pkg.framework.keys import object_key

POLL_SECONDS = 0.05


def eventually(
    check: Callable[[], bool], *, timeout: float, what: str, interval: float = POLL_SECONDS
) -> None:
    """Polls ``check`` until it holds; fails the test naming ``what`` once ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class ObservedClient:
    """The reflector's ListerWatcher over a real client: counts, records and can hold back watches."""

    def __init__(self, kubeconfig: str) -> None:
        self._client = KubeClient(new_api_client(kubeconfig), field_manager="gpu-control-plane-tests")
        self._lock = threading.Lock()
        self._list_calls = 0
        self._events: list[WatchEvent] = []
        self._gone = 0
        # The gate: while holding, a watch call waits on the condition; waiting counts such calls.
        self._gate = threading.Condition(self._lock)
        self._holding = False
        self._waiting = 0

    # -- what the test reads ---------------------------------------------------------------------

    @property
    def list_calls(self) -> int:
        """``list_page`` calls so far (a list of N pages counts N)."""
        with self._lock:
            return self._list_calls

    @property
    def gone_errors(self) -> int:
        """Watches that ended with 410 Gone (their resourceVersion was compacted away)."""
        with self._lock:
            return self._gone

    def events(self) -> list[WatchEvent]:
        """Every watch event the server sent so far, in arrival order."""
        with self._lock:
            return list(self._events)

    def hold_watches(self) -> None:
        """From now on a new ``watch`` call waits until :meth:`release_watches`."""
        with self._gate:
            self._holding = True

    def release_watches(self) -> None:
        with self._gate:
            self._holding = False
            self._gate.notify_all()

    def watch_held(self) -> bool:
        """True while a ``watch`` call is waiting at the closed gate (not merely passing it)."""
        with self._gate:
            return self._waiting > 0

    # -- the ListerWatcher side ------------------------------------------------------------------

    def list_page(
        self,
        kind: ResourceKind[Any],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListPage:
        with self._lock:
            self._list_calls += 1
        return self._client.list_page(
            kind,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
            resource_version=resource_version,
        )

    def watch(
        self,
        kind: ResourceKind[Any],
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        read_timeout: float = 90.0,
    ) -> Iterator[WatchEvent]:
        with self._gate:
            # Counted only while actually waiting: the count and the check share the lock.
            self._waiting += 1
            while self._holding:
                self._gate.wait()
            self._waiting -= 1
        events = self._client.watch(
            kind,
            resource_version=resource_version,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
            read_timeout=read_timeout,
        )
        return self._observe(events)

    def _observe(self, events: Iterator[WatchEvent]) -> Iterator[WatchEvent]:
        try:
            for event in events:
                with self._lock:
                    self._events.append(event)
                yield event
        except GoneError:
            with self._lock:
                self._gone += 1
            raise
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()


@dataclass(frozen=True)
class Notification:
    """One handler call: ``action`` is add, update or delete; ``obj`` the new (or deleted) object."""

    action: str
    key: str
    obj: Any
    initial: bool = False
    old: Any = None


class RecordingListener:
    """A ResourceListener that records every call, in order, for the test thread to read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Notification] = []

    def on_add(self, obj: Any, *, is_in_initial_list: bool) -> None:
        self._record(Notification("add", object_key(obj), obj, initial=is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self._record(Notification("update", object_key(new), new, old=old))

    def on_delete(self, obj: Any) -> None:
        key = obj.key if isinstance(obj, DeletedFinalStateUnknown) else object_key(obj)
        self._record(Notification("delete", key, obj))

    def seen(self, since: int = 0) -> list[Notification]:
        with self._lock:
            return self._seen[since:]

    def count(self) -> int:
        with self._lock:
            return len(self._seen)

    def told(self, since: int, versions: dict[str, str], deleted: set[str]) -> bool:
        """Whether, since notification ``since``, the last word on each key is its version or its delete.

        The informer tells its listeners from a dispatch thread after the store has changed, so a
        test that watched the store converge must wait for this too before reading notifications.
        """
        last = {n.key: n for n in self.seen(since)}
        return all(
            key in last and last[key].action != "delete" and rv(last[key].obj) == version
            for key, version in versions.items()
        ) and all(key in last and last[key].action == "delete" for key in deleted)

    def _record(self, notification: Notification) -> None:
        with self._lock:
            self._seen.append(notification)


@contextlib.contextmanager
def running(informer: SharedInformer[Any]) -> Iterator[SharedInformer[Any]]:
    """Runs ``informer`` in a thread for the ``with`` block; stops and joins it on the way out."""
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), name=f"test-{informer.name}", daemon=True)
    thread.start()
    try:
        yield informer
    finally:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive(), f"{informer.name} did not stop"


def rv(obj: Any) -> str:
    """An object's resourceVersion."""
    return str(obj.metadata.resource_version)


def resource_versions(objects: list[Any]) -> dict[str, str]:
    """``{key: resourceVersion}``: equal maps mean the same objects in the same versions."""
    return {object_key(obj): rv(obj) for obj in objects}
