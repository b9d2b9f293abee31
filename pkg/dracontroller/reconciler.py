"""The claim reconciler: the framework's object reconciler over a claim from the cache.

It has no writer: a ResourceClaim's status has no ``observedGeneration``, and its writes
(finalizer, mark, allocation) must happen in a fixed order, with the devices reserved by the
decision that chose them, so the handlers ask the decisions service for them. What stays generic
is the template's contract:

* a missing claim is done (its release, if it was allocated, is the kube-controller-manager's);
* a write conflict (:class:`~pkg.framework.reconcile.ConflictRequeue`, raised by the writer
  service) is routine: requeue with backoff, logged at debug;
* any other handler error propagates (retried with backoff by the controller);
* otherwise the merged Result of the handlers, then their ``after_write`` hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.internal.state import ClaimSnapshot
from pkg.framework.reconcile import Handler, ObjectReconciler, Request


class ClaimReconciler(ObjectReconciler[ResourceV1ResourceClaim, ClaimSnapshot]):
    def __init__(
        self,
        *,
        get_claim: Callable[[Request], ResourceV1ResourceClaim | None],
        state_factory: Callable[[ResourceV1ResourceClaim], ClaimSnapshot],
        handlers: Sequence[Handler[ClaimSnapshot]],
    ) -> None:
        super().__init__(get=get_claim, state=state_factory, handlers=handlers)
