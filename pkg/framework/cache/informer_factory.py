"""InformerFactory: one shared informer per watch, for every controller in the process.

client-go's ``SharedInformerFactory`` and controller-runtime's informer cache in one small class.
Controllers ask for an informer by what they watch, ``(kind, namespace, label selector, field
selector)``, and two controllers asking for the same watch get the same :class:`SharedInformer`,
so the process opens one watch and keeps one copy of the objects per distinct watch.

Lifecycle: :meth:`InformerFactory.start` starts every informer requested so far, each in its own
daemon thread, and returns; an informer requested after ``start`` is started at once, so a
controller set up late still gets a running cache. :meth:`InformerFactory.run` (the Runnable entry
point) starts, blocks until ``stop`` and re-raises the first fatal error of an informer, because a
cache that silently died would leave its controllers reconciling from stale state forever.

Concurrency: one lock guards the informer map and the started flag, so a ``get_informer`` racing
``start`` either is started by ``start`` or starts its informer itself, never both or neither.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.reflector import ListerWatcher, ObjectTransform, RawTransform
from pkg.framework.client import ResourceKind

ModelT = TypeVar("ModelT", bound=BaseModel)

logger = logging.getLogger(__name__)

InformerKey = tuple[ResourceKind[Any], str, str, str]
"""(kind, namespace, label selector, field selector); "" means all namespaces / no selector."""

FAILURE_POLL_SECONDS = 0.2


class InformerFactory:
    """Creates, shares and runs informers. A Runnable that needs no leader election."""

    needs_leader_election = False

    def __init__(
        self,
        client: ListerWatcher,
        *,
        resync_period: float | None = None,
        page_size: int = 500,
        read_timeout: float = 90.0,
        name: str = "informer-factory",
    ) -> None:
        self.name = name
        self._client = client
        self._resync_period = resync_period
        self._page_size = page_size
        self._read_timeout = read_timeout
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, SharedInformer[Any]] = {}
        self._threads: list[threading.Thread] = []
        self._stop: threading.Event | None = None
        self._failure: BaseException | None = None
        self._transforms: dict[ResourceKind[Any], RawTransform] = {}
        self._object_transforms: dict[ResourceKind[Any], ObjectTransform] = {}

    def set_transform(self, kind: ResourceKind[Any], transform: RawTransform) -> None:
        """Projects every object of ``kind`` before it is decoded and cached, in every informer of
        ``kind`` created from now on (see :mod:`pkg.framework.cache.reflector`). Informers are
        shared, so a projection must keep what every controller of the process reads: it is set
        once, by the composition root, before the informers are requested. Raises if an informer of
        ``kind`` exists already, because it would keep full objects while the caller assumes not."""
        with self._lock:
            if any(key[0] == kind for key in self._informers):
                raise RuntimeError(f"an informer of {kind} exists already; set its transform first")
            self._transforms[kind] = transform

    def set_object_transform(self, kind: ResourceKind[Any], transform: ObjectTransform) -> None:
        """Maps every decoded object of ``kind`` before it is cached (client-go's ``SetTransform``),
        in every informer of ``kind`` created from now on; the same rules as :meth:`set_transform`."""
        with self._lock:
            if any(key[0] == kind for key in self._informers):
                raise RuntimeError(f"an informer of {kind} exists already; set its transform first")
            self._object_transforms[kind] = transform

    def get_informer(
        self,
        kind: ResourceKind[ModelT],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> SharedInformer[ModelT]:
        """The shared informer for this watch, created (and started, if the factory is) on demand."""
        key: InformerKey = (kind, namespace or "", label_selector or "", field_selector or "")
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                informer = SharedInformer(
                    client=self._client, kind=kind, namespace=namespace,
                    label_selector=label_selector, field_selector=field_selector,
                    resync_period=self._resync_period, page_size=self._page_size,
                    read_timeout=self._read_timeout, transform=self._transforms.get(kind),
                    object_transform=self._object_transforms.get(kind),
                )  # fmt: skip
                self._informers[key] = informer
                if self._stop is not None:
                    self._start_informer(informer, self._stop)
            return cast(SharedInformer[ModelT], informer)

    def informers(self) -> list[SharedInformer[Any]]:
        with self._lock:
            return list(self._informers.values())

    def start(self, stop: threading.Event) -> None:
        """Starts every informer requested so far (and, from now on, each new one); returns at once."""
        with self._lock:
            if self._stop is not None:
                return
            self._stop = stop
            for informer in self._informers.values():
                self._start_informer(informer, stop)

    def run(self, stop: threading.Event) -> None:
        """Starts, then blocks until ``stop``; raises if an informer failed fatally."""
        self.start(stop)
        while not stop.wait(FAILURE_POLL_SECONDS):
            if self._failure is not None:
                raise RuntimeError(f"{self.name}: an informer failed") from self._failure
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def has_synced(self) -> bool:
        """True when every informer requested so far has synced (the manager's cache check)."""
        return all(informer.has_synced() for informer in self.informers())

    def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Waits until every informer requested so far has synced; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_for_sync(remaining):
                logger.warning("cache not synced in time", extra={"informer": informer.name})
                return False
        return True

    def _start_informer(self, informer: SharedInformer[Any], stop: threading.Event) -> None:
        # Caller holds the lock.
        thread = threading.Thread(target=self._run_informer, args=(informer, stop), name=informer.name)
        thread.daemon = True
        self._threads.append(thread)
        thread.start()

    def _run_informer(self, informer: SharedInformer[Any], stop: threading.Event) -> None:
        try:
            informer.run(stop)
        except BaseException as exc:
            logger.error("informer failed", exc_info=exc, extra={"informer": informer.name})
            self._failure = self._failure or exc
