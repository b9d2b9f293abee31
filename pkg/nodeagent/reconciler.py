"""The node sync as a reconciler: one request, ``sync``, for the whole node.

Why one key: the agent's desired state is a function of the node (every card, the host), not of
one object, and the triggers (start, udev, a deleted object, SIGHUP, the periodic resync) carry no
information a level-based sync needs. Each trigger just adds ``sync`` to the controller's queue;
the queue de-duplicates (a burst of triggers costs one pass, a trigger during a pass one more
pass), one worker means two syncs never overlap, and a failed sync is retried with the queue's
exponential backoff. So the framework's :class:`~pkg.framework.controller.controller.Controller` runs it
unchanged.

Why the :class:`~pkg.framework.reconcile.chain.BaseReconciler` handler chain rather than the
StepTaker: the steps are level-based and idempotent, and a failed sync is simply run again, so
there is nothing to roll back; what the chain adds is what a sync needs (ordered steps over one
state, stop on the first raised error). The ResourceReconciler is not used because a sync writes
many objects, each with its own write (see the writer service), not one fetched resource.

A pass: build the state from the caches, run the chain, wait until the caches hold this pass's
writes (the write barrier), record metrics, and raise if a step failed (recorded failures or a
raised error) so that the controller retries with backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from pkg.framework.reconcile import BaseReconciler, Handler
from pkg.framework.reconcile.contract import Request, Result
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


class NodeSyncReconciler:
    """Runs the sync chain over a fresh state for every request (there is only ``sync``)."""

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
        self._state_factory = state_factory
        self._chain = BaseReconciler(handlers)
        self._cache = cache
        self._cache_wait = cache_wait_seconds
        metrics.init_node(node_name)

    def reconcile(self, request: Request) -> Result:
        started = time.monotonic()
        state = self._state_factory()
        try:
            outcome = self._chain.handle(state)
        finally:
            if state.writes:
                self._cache.wait_for_cache(self._cache_wait)
            metrics.sync_duration.observe(time.monotonic() - started)
        failed_steps = {failure.step for failure in state.failures}
        if outcome.error is not None and outcome.ran:
            failed_steps.add(outcome.ran[-1].name)
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
                "duration_seconds": round(time.monotonic() - started, 4),
            },
        )
        return Result()
