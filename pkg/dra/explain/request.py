"""Asking gpu-dra-controller for an explanation: create a ClaimExplanation, watch for the answer,
delete the request.

Why through the controller: it holds every ResourceSlice and the built pools already, so it
answers in seconds where reading the cluster takes 12-46 s at 1,000 nodes
(docs/allocator.md#explain-served-by-the-controller). Used by ``gpu-dra-controller explain`` and
``kubectl gpu explain`` alike; each falls back to computing the explanation itself when this
raises :class:`NotServedError` (no CRD, no right to create the request, no answer in time).

The request carries an ownerReference to the claim, so a request the CLI could not delete (it was
killed) goes with the claim, and the controller deletes answered ones after its TTL anyway.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client import ResourceV1ResourceClaim
from urllib3.exceptions import HTTPError

from api.gpu.v1alpha1 import ClaimExplanation, ClaimExplanationSpec, ExplanationCause, ExplanationOutcome
from pkg.domain.kinds import CLAIM_EXPLANATION
from pkg.framework.client import ApiError, KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.watch import WatchEventType, WatchStreamClosedError
from pkg.framework.reconcile.resource_builder import ResourceBuilder

DEFAULT_TIMEOUT = 20.0
"""Seconds to wait for the controller: answers took 1.5-3.5 s at 1,000 nodes on a loaded 2-CPU machine
(docs/performance.md), so twenty means the controller is down, not leading, or swamped; the local
computation (12-46 s at that size) is then the answer. No CRD or no right to create the request
falls back at once, without waiting."""


class NotServedError(Exception):
    """The controller did not answer; the message says why (for the fallback's warning)."""


@dataclass(frozen=True)
class Answer:
    outcome: ExplanationOutcome
    report: str
    reason: str | None = None
    current_allocation: str | None = None
    truncated: bool = False
    causes: list[ExplanationCause] | None = None  # the verdict's causes (none from an older controller)


def request_for(claim: ResourceV1ResourceClaim, spec: ClaimExplanationSpec) -> ClaimExplanation:
    """The request object: named after the claim (``generateName``), owned by it."""
    meta = claim.metadata
    if meta is None or not (meta.name and meta.uid and meta.namespace):
        raise ValueError("the claim must be one read from the API server (name, namespace and uid)")
    builder = ResourceBuilder(
        generate_name=f"{meta.name[:50]}-", namespace=meta.namespace, kind=CLAIM_EXPLANATION
    )
    return ClaimExplanation(metadata=builder.owned_by(claim, RESOURCE_CLAIM).meta(), spec=spec)


def answer_of(obj: ClaimExplanation) -> Answer | None:
    """The answer ``obj`` carries for its current spec, or None while it is unanswered."""
    status, generation = obj.status, (obj.metadata.generation or 0)
    if status is None or status.outcome is None or (status.observed_generation or 0) < generation:
        return None
    return Answer(
        outcome=status.outcome,
        report=status.report or "",
        reason=status.reason,
        current_allocation=status.current_allocation,
        truncated=bool(status.truncated),
        causes=status.causes,
    )


def ask(
    kube: KubeClient,
    claim: ResourceV1ResourceClaim,
    spec: ClaimExplanationSpec,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
) -> Answer:
    """Creates the request, waits up to ``timeout`` seconds for its answer, deletes it."""
    deadline = clock() + timeout
    try:
        created = kube.create(CLAIM_EXPLANATION, request_for(claim, spec))
    except NotFoundError:
        raise NotServedError(
            "the ClaimExplanation API is not installed (claimexplanations.gpu.deckhouse.io)"
        ) from None
    except ApiError as err:
        if err.status == 403:
            raise NotServedError(
                "forbidden: you cannot create claimexplanations.gpu.deckhouse.io in this namespace"
            ) from None
        raise NotServedError(f"creating the ClaimExplanation: the API server answered {err}") from None
    except (HTTPError, OSError) as err:
        raise NotServedError(f"creating the ClaimExplanation: {err}") from None
    name = created.metadata.name or ""
    namespace = created.metadata.namespace or ""
    try:
        return _wait(kube, created, deadline=deadline, clock=clock)
    finally:
        with contextlib.suppress(ApiError, HTTPError, OSError):
            kube.delete(CLAIM_EXPLANATION, name, namespace)


def _wait(
    kube: KubeClient, created: ClaimExplanation, *, deadline: float, clock: Callable[[], float]
) -> Answer:
    """Watches the one object from its created version until it carries an answer (a watch, not
    polling: the answer arrives the moment the controller writes it)."""
    meta = created.metadata
    version = meta.resource_version or ""
    while (remaining := deadline - clock()) > 0:
        try:
            for event in kube.watch(
                CLAIM_EXPLANATION,
                namespace=meta.namespace,
                resource_version=version,
                field_selector=f"metadata.name={meta.name}",
                timeout_seconds=max(1, math.ceil(remaining)),
                read_timeout=remaining + 1.0,
            ):
                if event.type is WatchEventType.BOOKMARK:
                    version = event.resource_version or version
                    continue
                if event.type is WatchEventType.DELETED:
                    raise NotServedError("the ClaimExplanation was deleted before it was answered")
                version = event.resource_version or version
                answer = answer_of(CLAIM_EXPLANATION.decode(event.raw))
                if answer is not None:
                    return answer
                if clock() >= deadline:
                    break
        except (WatchStreamClosedError, HTTPError, OSError):
            continue  # a broken stream: watch again from the last version, while time is left
        except ApiError as err:  # 410 Gone, or the watch refused: one read says whether it is done
            try:
                answer = answer_of(kube.get(CLAIM_EXPLANATION, meta.name or "", meta.namespace))
            except (ApiError, HTTPError, OSError):
                raise NotServedError(f"watching the ClaimExplanation: {err}") from None
            if answer is not None:
                return answer
            raise NotServedError(f"watching the ClaimExplanation: {err}") from None
    raise NotServedError("gpu-dra-controller did not answer in time (is it running?)")
