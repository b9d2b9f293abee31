"""The thin claim reconciler: fetch → state → handlers (spec §10.4 item 2).

Unlike the PhysicalGPU reconciler it has no generic resource update at the end: a ResourceClaim's
status has no ``observedGeneration``, and its writes (finalizer, mark, allocation) must happen in a
fixed order under the decision lock, so the handlers ask the writer service for them. What stays
generic is the contract (:mod:`pkg.framework.reconcile.contract`):

* a missing claim is done (its release, if it was allocated, is the kube-controller-manager's);
* a write conflict (:class:`~pkg.framework.reconcile.ConflictRequeue`) is routine: requeue with
  backoff, logged at debug;
* any other handler error propagates (retried with backoff by the controller);
* otherwise the merged Result of the handlers, then their post-update ``finalize`` hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.internal.state import ClaimState
from pkg.framework.reconcile import BaseReconciler, ConflictRequeue, Handler
from pkg.framework.reconcile.contract import Request, Result

logger = logging.getLogger(__name__)


class ClaimReconciler:
    def __init__(
        self,
        *,
        get_claim: Callable[[Request], ResourceV1ResourceClaim | None],
        state_factory: Callable[[ResourceV1ResourceClaim], ClaimState],
        handlers: Sequence[Handler[ClaimState]],
    ) -> None:
        self._get_claim = get_claim
        self._state_factory = state_factory
        self._chain = BaseReconciler(handlers)

    def reconcile(self, request: Request) -> Result:
        claim = self._get_claim(request)
        if claim is None:
            logger.debug("claim not found", extra={"object": str(request)})
            return Result()
        state = self._state_factory(claim)
        outcome = self._chain.handle(state)
        if isinstance(outcome.error, ConflictRequeue):
            logger.debug("requeue after a write conflict: %s", outcome.error, extra={"object": str(request)})
            return Result(requeue=True)
        if outcome.error is not None:
            raise outcome.error
        self._chain.finalize(state, outcome.ran)
        return outcome.result
