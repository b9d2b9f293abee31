"""The manager: runs every component of a process and stops them together.

Start order (controller-runtime's): the monitoring server first, so probes answer during start-up;
then the declared store indexes are added to the informers of their kinds (:attr:`Manager.indexes`,
:mod:`pkg.framework.cache.indexer`) before any informer lists an object; then informer caches,
waiting until each has synced, because controllers read only from caches and a reconcile against a
half-filled cache would act on a partial view; then the other runnables; the runnables with
``needs_leader_election`` start only while this process holds the lease (at once when leader
election is off).

Failure policy: one way out. When a runnable raises, or the lease is lost, the manager stops
everything and :meth:`Manager.run` raises. A process that lost its lease must not keep half its
work running; it exits and restarts clean (the kubelet restarts it), as controller-runtime's does.

Stop order is the reverse, with one deliberate twist: leader runnables stop *before* the lease is
released, so a successor never overlaps with our last reconciles; caches stop after the
controllers that read them; the server last. All of it within ``shutdown_timeout``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Protocol, runtime_checkable

from pkg.framework.cache.indexer import IndexedInformer, IndexRegistry
from pkg.framework.manager.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    LeaseClient,
)
from pkg.framework.manager.runnable import Runnable
from pkg.framework.manager.server import HealthCheck, HealthChecks, MonitoringServer
from pkg.framework.metrics.leader import LeaderMetrics
from pkg.framework.metrics.provider import MetricsProvider

logger = logging.getLogger(__name__)

_POLL = 0.05  # how often waits re-check the caller's stop event (read lock-free via is_set)
_GROUPS = ("leader", "election", "runnables", "caches", "server")  # in stop order


@runtime_checkable
class CacheRunnable(Protocol):
    """A runnable that fills a cache (an informer): started first, waited for until synced."""

    name: str
    needs_leader_election: bool

    def run(self, stop: threading.Event) -> None: ...

    def has_synced(self) -> bool: ...


@runtime_checkable
class InformerSet(Protocol):
    """A cache runnable holding several informers (the informer factory)."""

    def informers(self) -> Sequence[IndexedInformer]: ...


class LeaderElectionLostError(RuntimeError):
    """This process lost its lease while running; it must exit and start again."""


class RunnableError(RuntimeError):
    """A runnable raised; the original exception is the ``__cause__``."""

    def __init__(self, name: str, cause: BaseException):
        super().__init__(f"runnable {name!r} failed: {cause!r}")
        self.runnable = name
        self.__cause__ = cause


class ShutdownTimeoutError(RuntimeError):
    """Some runnables did not return within the shutdown timeout."""


class Manager:
    """Owns the runnables, the leader elector, the health checks and the monitoring server."""

    def __init__(
        self,
        *,
        leader_election: LeaderElectionConfig | None = None,
        lease_client: LeaseClient | None = None,
        monitoring_bind_address: str | None = None,
        cache_sync_timeout: float = 120.0,
        shutdown_timeout: float = 30.0,
        metrics: MetricsProvider | None = None,
    ):
        if (leader_election is None) != (lease_client is None):
            raise ValueError("leader_election and lease_client go together")
        self._runnables: list[Runnable] = []
        self._healthz = HealthChecks("healthz")
        self._readyz = HealthChecks("readyz")
        self._healthz.add("ping", lambda: None)
        self._readyz.add("caches-synced", self._check_caches_synced)
        self.metrics = metrics or MetricsProvider()
        self.indexes = IndexRegistry()
        """Where setup modules declare the store indexes their controllers read (``IndexField``)."""
        # Every process exposes the leader families, leading or not, so dashboards see a 0, not a gap.
        LeaderMetrics(provider=self.metrics)
        self._server = None
        if monitoring_bind_address is not None:
            self._server = MonitoringServer(
                bind_address=monitoring_bind_address,
                healthz=self._healthz,
                readyz=self._readyz,
                registry=self.metrics.registry,
            )
        self._elector = None
        if leader_election is not None and lease_client is not None:
            callbacks = LeaderCallbacks(
                on_started_leading=self._on_started_leading, on_stopped_leading=self._on_stopped_leading
            )
            self._elector = LeaderElector(
                config=leader_election, client=lease_client, callbacks=callbacks, metrics=self.metrics
            )
        self._cache_sync_timeout = cache_sync_timeout
        self._shutdown_timeout = shutdown_timeout
        self._lock = threading.Lock()
        self._stops = {group: threading.Event() for group in _GROUPS}
        self._threads: dict[str, list[threading.Thread]] = {group: [] for group in _GROUPS}
        self._wake = threading.Event()  # a runnable failed or the lease was lost
        self._error: BaseException | None = None
        self._caches_synced = False
        self._started = False

    def add(self, runnable: Runnable) -> None:
        if self._started:
            raise RuntimeError(f"cannot add {runnable.name!r}: the manager is already running")
        self._runnables.append(runnable)

    def add_readyz_check(self, name: str, check: HealthCheck) -> None:
        self._readyz.add(name, check)

    def run(self, stop: threading.Event) -> None:
        """Runs until ``stop`` is set (returns) or something fails (raises, after stopping all)."""
        if self._started:
            raise RuntimeError("a manager runs once")
        self._started = True
        try:
            if self._start(stop):
                while not stop.is_set() and not self._wake.wait(_POLL):
                    pass
        finally:
            self._shutdown()
        if self._error is not None:
            raise self._error

    # -- start ------------------------------------------------------------------------------------

    def _start(self, stop: threading.Event) -> bool:
        """Starts everything in order; False when stopped or failed before the end."""
        if self._server is not None:
            self._spawn("server", self._server)
        caches = [r for r in self._runnables if isinstance(r, CacheRunnable) and not r.needs_leader_election]
        self.indexes.index_all(self._informers(caches))
        for cache in caches:
            self._spawn("caches", cache)
        if not self._wait_for_sync(caches, stop):
            return False
        for runnable in self._runnables:
            if not runnable.needs_leader_election and runnable not in caches:
                self._spawn("runnables", runnable)
        if self._elector is not None:
            self._spawn("election", self._elector)
        else:
            self._on_started_leading(self._stops["leader"])
        return True

    @staticmethod
    def _informers(caches: list[CacheRunnable]) -> list[IndexedInformer]:
        found: list[IndexedInformer] = []
        for cache in caches:
            if isinstance(cache, InformerSet):
                found.extend(cache.informers())
            elif isinstance(cache, IndexedInformer):
                found.append(cache)
        return found

    def _wait_for_sync(self, caches: list[CacheRunnable], stop: threading.Event) -> bool:
        deadline = time.monotonic() + self._cache_sync_timeout
        while not all(cache.has_synced() for cache in caches):
            if stop.is_set() or self._wake.is_set():
                return False
            if time.monotonic() > deadline:
                pending = [c.name for c in caches if not c.has_synced()]
                self._fail(TimeoutError(f"caches not synced within {self._cache_sync_timeout}s: {pending}"))
                return False
            self._wake.wait(_POLL)
        self._caches_synced = True
        logger.info("caches synced", extra={"caches": [c.name for c in caches]})
        return True

    def _on_started_leading(self, _stop_leading: threading.Event) -> None:
        # Losing the lease is handled in _on_stopped_leading; the manager stops the leader group.
        for runnable in self._runnables:
            if runnable.needs_leader_election:
                self._spawn("leader", runnable)

    def _on_stopped_leading(self) -> None:
        if not self._stops["election"].is_set():
            self._fail(LeaderElectionLostError("leader election lost: stopping to restart clean"))

    def _spawn(self, group: str, runnable: Runnable) -> None:
        stop = self._stops[group]

        def target() -> None:
            try:
                runnable.run(stop)
            except BaseException as exc:
                logger.exception("runnable failed", extra={"runnable": runnable.name})
                self._fail(RunnableError(runnable.name, exc))
                return
            if not stop.is_set():
                logger.warning("runnable returned before stop", extra={"runnable": runnable.name})

        with self._lock:
            if stop.is_set():
                return  # shutting down: e.g. the lease arrived just as we stop
            thread = threading.Thread(target=target, name=runnable.name, daemon=True)
            self._threads[group].append(thread)
            thread.start()
        logger.debug("started runnable", extra={"runnable": runnable.name, "group": group})

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = error
        self._wake.set()

    def _check_caches_synced(self) -> None:
        if not self._caches_synced:
            raise RuntimeError("informer caches have not synced yet")

    # -- stop -------------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        deadline = time.monotonic() + self._shutdown_timeout
        stuck: list[str] = []
        for group in _GROUPS:
            with self._lock:
                self._stops[group].set()
                threads = list(self._threads[group])
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    stuck.append(thread.name)
        if stuck:
            logger.error("runnables did not stop in time", extra={"runnables": stuck})
            self._fail(ShutdownTimeoutError(f"not stopped within {self._shutdown_timeout}s: {stuck}"))
        if self._server is not None and not self._threads["server"]:
            self._server.close()


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set ``stop`` (graceful); a second one exits at once with status 1.

    The handler only starts a thread that sets the event: a Python signal handler runs between two
    bytecodes of the main thread, which may be holding that very event's lock inside ``wait``.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("signal handlers can only be installed from the main thread")
    received: list[int] = []

    def request_stop(signum: int) -> None:
        logger.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    def handle(signum: int, _frame: FrameType | None) -> None:
        if received:
            os._exit(1)
        received.append(signum)
        threading.Thread(target=request_stop, args=(signum,), name="signal-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
