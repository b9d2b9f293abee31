"""The node sync as a reconciler: one request, ``sync``, for the whole node.

Why one key: the agent's desired state is a function of the node (every card, the host), not of
one object, and the sources that wake it (start, udev, a deleted object, SIGHUP, the periodic
resync) carry no information a level-based sync needs. Each maps to ``sync`` in the controller's
queue; the queue de-duplicates (a burst of events costs one pass, an event during a pass one more
pass), one worker means two syncs never overlap, and a failed sync is retried with the queue's
exponential backoff. So the framework's :class:`~pkg.framework.controller.controller.Controller` runs it
unchanged.

It is the framework's :class:`~pkg.framework.reconcile.SingletonReconciler`, which fixes the one
worker this relies on (two syncs of one node must never overlap). Why a handler chain rather
than steps with rollback: the steps are level-based and idempotent, and a failed sync is simply
run again, so there is nothing to roll back; what the chain adds is what a sync needs (ordered steps
over one scratch state, stop on the first raised error). The template's writer is the write
barrier: the steps wrote through the writer service (each object its own write), and the pass
waits until the caches hold those writes, so the next pass does not act on a stale cache.

A pass: build the state from the caches, run the chain, wait for the caches (the writer), then
:meth:`NodeSyncReconciler.conclude` records metrics and raises if a step failed (recorded failures
or a raised error), so that the controller retries with backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from pkg.framework.reconcile import ChainOutcome, Handler, Request, Result, SingletonReconciler
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.service import CacheWaiter
from pkg.nodeagent.internal.state import Failure, StateFactory, SyncState

logger = logging.getLogger(__name__)

SYNC = Request(name="sync")
CACHE_WAIT_SECONDS = 10.0


class SyncFailedError(Exception):
    """Some steps of a sync failed; each failure was logged with its object when it happened."""

    def __init__(self, failures: Sequence[Failure]) -> None:
        steps = sorted({failure.step for failure in failures})
        super().__init__(f"{len(failures)} failure(s) in {', '.join(steps)}; first: {failures[0]}")
        self.failures = tuple(failures)


class CacheLagError(Exception):
    """The caches did not show this pass's writes in time; the next pass must not trust them yet."""


class CacheCatchUp:
    """The sync's writer: when the pass wrote anything, wait (bounded) until the caches hold it.

    A wait that times out fails the pass (:class:`CacheLagError`) instead of passing for a
    success: the controller retries it with backoff, and by then the caches have either caught up
    or the failure is visible in logs and metrics — rather than a next pass acting on a cache
    without the object it just created.
    """

    def __init__(self, cache: CacheWaiter, *, seconds: float) -> None:
        self._cache = cache
        self._seconds = seconds

    def write(self, obj: SyncState, state: SyncState) -> None:
        if state.writes and not self._cache.wait_for_cache(self._seconds):
            raise CacheLagError(
                f"the caches did not show the sync's {state.writes} write(s) within {self._seconds:g}s"
            )


class NodeSyncReconciler(SingletonReconciler[SyncState]):
    """The node's sync: one request, ``sync``, one worker (declared by the template)."""

    def __init__(
        self,
        *,
        node_name: str,
        state_factory: StateFactory,
        handlers: Sequence[Handler[SyncState]],
        cache: CacheWaiter,
        cache_wait_seconds: float = CACHE_WAIT_SECONDS,
    ) -> None:
        self._node = node_name
        super().__init__(
            request=SYNC,
            state=state_factory,
            handlers=handlers,
            writer=CacheCatchUp(cache, seconds=cache_wait_seconds),
            conclude=self.conclude,
        )
        metrics.init_node(node_name)

    def conclude(self, state: SyncState, outcome: ChainOutcome[SyncState]) -> Result:
        """Metrics, then raise on any failure so the controller retries, else log the pass."""
        metrics.sync_duration.observe(time.monotonic() - state.started)
        failed_steps = {failure.step for failure in state.failures}
        if outcome.failed_step is not None:
            failed_steps.add(outcome.failed_step)
        for step in sorted(failed_steps):
            metrics.sync_errors.labels(node=self._node, step=step).inc()
        if outcome.error is not None:
            raise outcome.error
        if state.failures:
            raise SyncFailedError(state.failures)
        log = logger.info if state.writes else logger.debug
        log(
            "node synced",
            extra={
                "node": self._node,
                "gpus": len(state.gpus),
                "writes": state.writes,
                "duration_seconds": round(time.monotonic() - state.started, 4),
            },
        )
        return Result()
