"""The controller: watched sources feed a rate-limiting queue drained by N reconcile workers.

Data flows one way: an informer's event, or a :mod:`~pkg.framework.controller.source`'s generic
event -> :class:`~pkg.framework.controller.enqueue.EnqueueingListener` (predicates, mapping) ->
queue -> worker -> :meth:`Reconciler.reconcile` -> the result decides
whether and when the request comes back. The queue guarantees that one request is never reconciled
by two workers at once, however many workers run; different requests run in parallel.

Outcomes, per the contract in :mod:`pkg.framework.reconcile.contract`:

* ``Result()``: the backoff is forgotten;
* ``requeue_after``: the backoff is forgotten and the request comes back after that delay;
* ``requeue=True``: the request comes back after its next backoff step;
* :class:`TerminalError`: logged and counted, the backoff forgotten, not retried;
* any other exception: logged and counted, retried with backoff.

Python has no panic, so the controller draws the line controller-runtime draws between an error and
a panic by type: exceptions in ``expected_errors`` (API errors and I/O errors by default) are
operational failures, logged in one line. Anything else is a bug (``KeyError``, ``TypeError``...):
it is logged with its traceback and counted in ``<ns>_reconcile_panics_total``; with
``recover_panic`` (the default) it is retried with backoff like an error and the worker carries on,
without it the controller stops and :meth:`Controller.run` re-raises it (a fatal error for the
manager).

The queue is a :class:`~pkg.framework.workqueue.priority.PriorityQueue` unless
``use_priority_queue`` is off: new and changed objects are reconciled before the initial list's and
resyncs' backlog, and a retry keeps the priority of the pass that failed. Log lines come from the
``log_constructor``'s loggers: the controller's own (built once) and one per reconcile that carries
the request.

Start-up starts the generic sources (each on a thread of its own), then waits for every watched
informer to sync, so the first reconciles read a complete cache
rather than concluding from a half-filled one that objects are missing. Stopping shuts the queue
down: each worker finishes the request in hand and exits without taking another, and ``run``
returns once all have exited. Queued requests are dropped; they are level-based and the next
leader's initial list finds them again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pkg.framework.cache.listener import ResourceListener
from pkg.framework.client.errors import ApiError
from pkg.framework.client.kinds import ResourceKind
from pkg.framework.controller.enqueue import EnqueueingListener, RequestMapper
from pkg.framework.controller.predicate import Predicate
from pkg.framework.controller.source import Source
from pkg.framework.logging.setup import new_controller_logger
from pkg.framework.metrics.provider import MetricsProvider
from pkg.framework.metrics.reconcile import ReconcileMetrics, ReconcileResult
from pkg.framework.reconcile.contract import Reconciler, Request, Result, TerminalError
from pkg.framework.workqueue.priority import PriorityQueue
from pkg.framework.workqueue.queue import RateLimitingQueue, ShutDownError
from pkg.framework.workqueue.ratelimiter import RateLimiter

# threading.Event cannot wait on two events; run() waits on `stop` in slices this long to notice a
# worker that died of an unrecovered exception.
_FATAL_CHECK_INTERVAL = 0.1
# Sources return soon after their stop is set (the slowest, udev, polls twice a second); a source
# stuck longer is a daemon thread and does not keep the process alive.
_SOURCE_JOIN_SECONDS = 2.0


@runtime_checkable
class EventSource(Protocol):
    """What a controller needs from an informer."""

    @property
    def kind(self) -> ResourceKind[Any]: ...

    def add_listener(self, handler: ResourceListener[Any]) -> object: ...

    def wait_for_sync(self, timeout: float) -> bool: ...


LogConstructor = Callable[[Request | None], "logging.LoggerAdapter[Any]"]
"""Builds a controller's logger: called with ``None`` once for the controller's own lines, and with
the request for each reconcile, so that every line about a request carries it (controller-runtime's
``LogConstructor``)."""


def default_log_constructor(name: str) -> LogConstructor:
    """Logger ``controller.<name>`` with field ``controller`` (so ``LOG_DEBUG_CONTROLLER_LIST``
    applies), plus field ``request`` for a reconcile."""
    base = new_controller_logger(name)

    def construct(request: Request | None) -> logging.LoggerAdapter[Any]:
        # An adapter over the controller's adapter: the inner one adds `controller` to the fields.
        return base if request is None else logging.LoggerAdapter(base, {"request": str(request)})

    return construct


class CacheSyncTimeoutError(Exception):
    """A watched source did not sync within the controller's ``cache_sync_timeout``."""


class Controller:
    """Reconciles the requests its watches enqueue, with ``max_concurrent_reconciles`` workers."""

    def __init__(
        self,
        *,
        name: str,
        reconciler: Reconciler,
        max_concurrent_reconciles: int = 1,
        recover_panic: bool = True,
        cache_sync_timeout: float = 120.0,
        needs_leader_election: bool = True,
        rate_limiter: RateLimiter[Request] | None = None,
        expected_errors: tuple[type[Exception], ...] = (ApiError, OSError),
        metrics: MetricsProvider | None = None,
        use_priority_queue: bool = True,
        log_constructor: LogConstructor | None = None,
    ) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError(f"controller {name!r}: max_concurrent_reconciles must be >= 1")
        limit = getattr(reconciler, "max_workers", None)  # declared by SingletonReconciler
        if limit is not None and max_concurrent_reconciles > limit:
            raise ValueError(
                f"controller {name!r}: its reconciler allows at most {limit} worker(s), "
                f"not {max_concurrent_reconciles}"
            )
        self.name = name
        self.needs_leader_election = needs_leader_election
        queue_type = PriorityQueue if use_priority_queue else RateLimitingQueue
        self.queue: RateLimitingQueue[Request] = queue_type(
            name=name, rate_limiter=rate_limiter, metrics=metrics
        )
        self._reconciler = reconciler
        self._workers = max_concurrent_reconciles
        self._recover_panic = recover_panic
        self._cache_sync_timeout = cache_sync_timeout
        self._expected_errors = expected_errors
        self._sources: list[EventSource] = []
        self._generic_sources: list[tuple[Source, EnqueueingListener]] = []
        self._log_constructor = log_constructor or default_log_constructor(name)
        self._log = self._log_constructor(None)
        self._started = False
        self._halt = threading.Event()  # set once workers must take no more requests
        self._fatal: Exception | None = None
        self._lock = threading.Lock()
        self._metrics = ReconcileMetrics(name, provider=metrics or MetricsProvider())

    def watch(
        self,
        source: EventSource | Source,
        mapper: RequestMapper,
        *,
        predicates: Sequence[Predicate] = (),
    ) -> None:
        """Queues the requests ``mapper`` maps ``source``'s events to, for events ``predicates`` pass.

        ``source`` is an informer (its object events) or a :class:`Source` (generic events; started
        when the controller runs). Watches are declared before :meth:`run`.
        """
        listener = EnqueueingListener(mapper=mapper, queue=self.queue, predicates=predicates)
        if isinstance(source, EventSource):
            with self._lock:
                if not any(known is source for known in self._sources):
                    self._sources.append(source)
            source.add_listener(listener)
            return
        with self._lock:
            if self._started:
                raise RuntimeError(
                    f"controller {self.name!r}: watch {source.name!r} before the controller runs"
                )
            self._generic_sources.append((source, listener))

    def run(self, stop: threading.Event) -> None:
        """Waits for the caches, then reconciles until ``stop`` is set. A controller runs once."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"controller {self.name!r} was already started")
            self._started = True
        workers: list[threading.Thread] = []
        sources_stop = threading.Event()
        sources = [
            threading.Thread(
                target=source.start,
                args=(listener.on_generic, sources_stop),
                name=f"{self.name}-source-{source.name}",
                daemon=True,
            )
            for source, listener in self._generic_sources
        ]
        try:
            for thread in sources:
                thread.start()
            self._wait_for_sync()
            self._log.info("starting %d workers", self._workers)
            for i in range(self._workers):
                worker = threading.Thread(target=self._work, name=f"{self.name}-worker-{i}", daemon=True)
                worker.start()
                workers.append(worker)
            while not stop.wait(_FATAL_CHECK_INTERVAL) and self._fatal is None:
                pass
        finally:
            sources_stop.set()
            self._halt.set()
            self.queue.shut_down()
            for worker in workers:
                worker.join()
            for thread in sources:
                thread.join(_SOURCE_JOIN_SECONDS)
        self._log.info("stopped")
        if self._fatal is not None:
            raise self._fatal

    def _wait_for_sync(self) -> None:
        deadline = time.monotonic() + self._cache_sync_timeout
        for source in list(self._sources):
            if not source.wait_for_sync(max(0.0, deadline - time.monotonic())):
                raise CacheSyncTimeoutError(
                    f"controller {self.name!r}: source {source.kind} did not sync "
                    f"within {self._cache_sync_timeout:g}s"
                )

    def _work(self) -> None:
        while True:
            try:
                request = self.queue.get()
            except ShutDownError:
                return
            try:
                if self._halt.is_set():
                    return
                self._reconcile(request)
            except Exception as exc:  # only what recover_panic=False lets through
                with self._lock:
                    self._fatal = self._fatal or exc
                self._halt.set()
                return
            finally:
                self.queue.done(request)

    def _reconcile(self, request: Request) -> None:
        log = self._log_constructor(request)
        self._metrics.active_workers.inc()
        started = time.monotonic()
        try:
            result = self._reconciler.reconcile(request)
        except TerminalError as exc:
            self._count_error()
            self.queue.forget(request)
            log.error("reconcile failed with a terminal error, not retried: %s", exc)
        except self._expected_errors as exc:
            self._count_error()
            self.queue.add_rate_limited(request)
            log.error("reconcile failed, retrying with backoff: %s", exc)
        except Exception:
            self._metrics.panics.inc()
            if not self._recover_panic:
                log.exception("reconcile raised unexpectedly, stopping the controller")
                raise
            self._count_error()
            self.queue.add_rate_limited(request)
            log.exception("reconcile raised unexpectedly, retrying with backoff")
        else:
            self._handle_result(request, result, log)
        finally:
            self._metrics.active_workers.dec()
            self._metrics.time.observe(time.monotonic() - started)

    def _handle_result(self, request: Request, result: Result, log: logging.LoggerAdapter[Any]) -> None:
        delay = result.requeue_after.total_seconds() if result.requeue_after is not None else 0.0
        if delay > 0:
            self.queue.forget(request)
            self.queue.add_after(request, delay)
            outcome = ReconcileResult.REQUEUE_AFTER
        elif result.requeue:
            self.queue.add_rate_limited(request)
            outcome = ReconcileResult.REQUEUE
        else:
            self.queue.forget(request)
            outcome = ReconcileResult.SUCCESS
        self._metrics.finished(outcome)
        log.debug("reconciled: %s", outcome.value)

    def _count_error(self) -> None:
        self._metrics.finished(ReconcileResult.ERROR)


__all__ = ["CacheSyncTimeoutError", "Controller", "EventSource", "LogConstructor", "default_log_constructor"]
