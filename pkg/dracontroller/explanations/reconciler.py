"""Answer each ClaimExplanation once, then delete it after its TTL.

A pass over one request (level-based, from the informer cache):

* gone or being deleted: nothing to do;
* answered for its current generation (``status.observedGeneration``): the answer stands — it is
  never recomputed, so a request costs one diagnosis however often it is resynced — and the
  object is deleted once ``ttl`` has passed since ``computedAt`` (requeued for then otherwise);
* otherwise: computed (:class:`~.explainer.Explainer`), applied to ``status``, requeued for the TTL.
  A claim the cache does not show is answered "not found" only once the request is
  :data:`CLAIM_GRACE` old: the requester read the claim from the API server just before creating
  the request, and the controller's claim cache may be a few milliseconds behind it.

Why a TTL and not "delete when read": the requester deletes the request as soon as it printed the
answer; the TTL is for requests whose requester went away (killed, timed out) or that someone
created with ``kubectl create`` to read later. The ownerReference to the claim removes them with
the claim as well. Load is bounded by the controller running one worker (one diagnosis in memory
at a time, the work queue deduplicating repeated events of a request) and by the answer-once rule.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from api.gpu.v1alpha1 import ClaimExplanation, ClaimExplanationSpec, ClaimExplanationStatus
from pkg.dracontroller.explanations.explainer import ClaimNotCachedError
from pkg.framework.reconcile.contract import Request, Result

DEFAULT_TTL = 600.0
"""Seconds an answered request is kept (``--explanation-ttl``)."""
CLAIM_GRACE = timedelta(seconds=5)
CLAIM_RETRY = timedelta(milliseconds=500)


class Answers(Protocol):
    def answer(self, namespace: str, spec: ClaimExplanationSpec) -> ClaimExplanationStatus: ...

    def not_found(self, key: str) -> ClaimExplanationStatus: ...


class Writes(Protocol):
    def answer(self, obj: ClaimExplanation, status: ClaimExplanationStatus) -> None: ...

    def delete(self, obj: ClaimExplanation) -> None: ...


class ExplanationReconciler:
    max_workers = 1  # one diagnosis at a time: its memory is bounded by one claim's trace

    def __init__(
        self,
        *,
        get: Callable[[Request], ClaimExplanation | None],
        explainer: Answers,
        writer: Writes,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._get, self._explainer, self._writer = get, explainer, writer
        self._ttl = timedelta(seconds=ttl)
        self._clock = clock

    def reconcile(self, request: Request) -> Result:
        obj = self._get(request)
        if obj is None or obj.metadata.deletion_timestamp is not None:
            return Result()
        generation = obj.metadata.generation or 0
        status = obj.status
        if (
            status is not None
            and status.outcome is not None
            and (status.observed_generation or 0) >= generation
        ):
            return self._expire(obj, status)
        try:
            answer = self._explainer.answer(request.namespace, obj.spec)
        except ClaimNotCachedError as missing:
            created = obj.metadata.creation_timestamp
            if created is not None and self._clock() - created < CLAIM_GRACE:
                return Result(requeue_after=CLAIM_RETRY)  # the claim cache may lag the requester's read
            answer = self._explainer.not_found(str(missing))
        answer.observed_generation = generation
        self._writer.answer(obj, answer)
        return Result(requeue_after=self._ttl)

    def _expire(self, obj: ClaimExplanation, status: ClaimExplanationStatus) -> Result:
        since = status.computed_at or obj.metadata.creation_timestamp
        left = self._ttl if since is None else since + self._ttl - self._clock()
        if left <= timedelta(0):
            self._writer.delete(obj)
            return Result()
        return Result(requeue_after=left)
