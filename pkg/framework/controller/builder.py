"""The controller builder: a controller is a name, a reconciler and its watches (controller-runtime's
``builder``).

A setup module says *what* a controller watches and *which* reconciler it runs; the builder does
the rest the same way for every controller: it creates the :class:`Controller` with the
manager's metrics provider, registers every watch (informers and
:mod:`~pkg.framework.controller.source` sources alike) and adds the controller to the manager::

    controller = (
        ControllerBuilder(manager, name="physicalgpu")
        .for_(gpus)                                          # the objects it reconciles
        .watches(nodes, gpus_on_node, predicates=[...])      # what else wakes them
        .workers(2)
        .complete(reconciler)
    )

Workers: one unless set. A reconciler that declares ``max_workers`` (the
:class:`~pkg.framework.reconcile.SingletonReconciler`) gets at most that many; asking for more
is refused by the controller, so the invariant cannot be lost in a setup module.

The other options are controller-runtime's ``controller.Options``, under the same names:
``recover_panic`` (default on: a bug in one reconcile is retried, not fatal),
``cache_sync_timeout`` (default 120 s), ``log_constructor`` (default
:func:`~pkg.framework.controller.controller.default_log_constructor`) and ``use_priority_queue``.
The priority queue is on by default, as in controller-runtime since v0.23: every controller here
lists all its objects when it starts or takes over the lease, and without priorities a change a
user makes meanwhile waits behind that whole backlog. Turning it off gives the plain FIFO
:class:`~pkg.framework.workqueue.queue.RateLimitingQueue`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pkg.framework.client.errors import ApiError
from pkg.framework.controller.controller import Controller, EventSource, LogConstructor
from pkg.framework.controller.enqueue import EnqueueRequestForObject, RequestMapper
from pkg.framework.controller.object_ref import Watch
from pkg.framework.controller.predicate import Predicate
from pkg.framework.controller.source import Source
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile.contract import Reconciler, Request
from pkg.framework.workqueue.ratelimiter import ItemExponentialFailureRateLimiter, RateLimiter


@dataclass(frozen=True)
class _Watch:
    source: EventSource | Source
    mapper: RequestMapper
    predicates: tuple[Predicate, ...]


class ControllerBuilder:
    """Collects a controller's options and watches; :meth:`complete` builds and registers it."""

    def __init__(self, manager: Manager, *, name: str) -> None:
        self._manager = manager
        self._name = name
        self._watches: list[_Watch] = []
        self._deferred: list[Callable[[Controller], None]] = []
        self._workers: int | None = None
        self._rate_limiter: RateLimiter[Request] | None = None
        self._expected_errors: tuple[type[Exception], ...] = (ApiError, OSError)
        self._leader_election = True
        self._recover_panic = True
        self._cache_sync_timeout = 120.0
        self._log_constructor: LogConstructor | None = None
        self._use_priority_queue = True

    def for_(self, informer: EventSource, *, predicates: Sequence[Predicate] = ()) -> ControllerBuilder:
        """Reconcile the objects of ``informer`` themselves (one request per object)."""
        return self.watches(informer, EnqueueRequestForObject(), predicates=predicates)

    def watches(
        self,
        source: EventSource | Source,
        mapper: RequestMapper,
        *,
        predicates: Sequence[Predicate] = (),
    ) -> ControllerBuilder:
        """Reconcile what ``mapper`` maps ``source``'s events to, for events ``predicates`` pass."""
        self._watches.append(_Watch(source, mapper, tuple(predicates)))
        return self

    def watches_with(self, source: EventSource, watch: Watch) -> ControllerBuilder:
        """A reusable watch that registers itself (an :class:`~.object_ref.ObjectRefWatch`: the
        controller's objects that reference the changed one)."""
        self._deferred.append(lambda controller: watch.watch(source, controller))
        return self

    def workers(self, count: int) -> ControllerBuilder:
        self._workers = count
        return self

    def rate_limiter(self, limiter: RateLimiter[Request]) -> ControllerBuilder:
        self._rate_limiter = limiter
        return self

    def backoff(self, *, base: float, max_delay: float) -> ControllerBuilder:
        """Per-request exponential backoff: a failed request is retried after ``base``, ``2*base``,
        ... at most ``max_delay`` seconds apart (no process-wide bucket: one node's requests)."""
        return self.rate_limiter(ItemExponentialFailureRateLimiter(base=base, max_delay=max_delay))

    def expected_errors(self, *errors: type[Exception]) -> ControllerBuilder:
        """Errors logged in one line and retried with backoff (anything else counts as a bug)."""
        self._expected_errors = errors
        return self

    def without_leader_election(self) -> ControllerBuilder:
        """Run on every replica (node components), not only on the leader."""
        self._leader_election = False
        return self

    def recover_panic(self, enabled: bool) -> ControllerBuilder:
        """Whether an unexpected exception (a bug) is retried with backoff (the default) or stops
        the controller and, through the manager, the process."""
        self._recover_panic = enabled
        return self

    def cache_sync_timeout(self, seconds: float) -> ControllerBuilder:
        """How long the controller waits for its informers to sync before failing to start."""
        if seconds <= 0:
            raise ValueError(f"controller {self._name!r}: cache_sync_timeout must be > 0, not {seconds}")
        self._cache_sync_timeout = seconds
        return self

    def log_constructor(self, construct: LogConstructor) -> ControllerBuilder:
        """Builds the controller's logger (``None``) and each reconcile's (the request)."""
        self._log_constructor = construct
        return self

    def use_priority_queue(self, enabled: bool) -> ControllerBuilder:
        """Whether new and changed objects overtake the initial list and resyncs (the default)."""
        self._use_priority_queue = enabled
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        limit: Any = getattr(reconciler, "max_workers", None)
        workers = self._workers if self._workers is not None else (limit or 1)
        controller = Controller(
            name=self._name,
            reconciler=reconciler,
            max_concurrent_reconciles=workers,
            needs_leader_election=self._leader_election,
            rate_limiter=self._rate_limiter,
            expected_errors=self._expected_errors,
            metrics=self._manager.metrics,
            recover_panic=self._recover_panic,
            cache_sync_timeout=self._cache_sync_timeout,
            log_constructor=self._log_constructor,
            use_priority_queue=self._use_priority_queue,
        )
        for watch in self._watches:
            controller.watch(watch.source, watch.mapper, predicates=watch.predicates)
        for register in self._deferred:
            register(controller)
        self._manager.add(controller)
        return controller


__all__ = ["ControllerBuilder"]
