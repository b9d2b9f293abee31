"""Computing one ClaimExplanation's answer from the controller's own view.

The claim and the allocation inputs are a ``Decisions.snapshot`` (``internal/service/decisions``,
taken under the decision lock, so the view is the one the next decision sees, in-flight
reservations included); the attempt and its diagnosis run outside the lock with the controller's
allocator, whose pool cache already holds every pool built, through the same
:func:`~pkg.dra.explain.report.explain_inputs` the CLIs use — one implementation, no second
allocator. A first-fit explanation uses a second :class:`~pkg.dra.allocator.Allocator` over the
*same* pool cache (a strategy is the allocator's), so nothing is built twice either.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import (
    CLAIM_EXPLANATION_MAX_REPORT_BYTES,
    ClaimExplanationSpec,
    ClaimExplanationStatus,
    ExplanationOutcome,
    ExplanationStrategy,
)
from pkg.dra.allocator import Allocator, FirstFit
from pkg.dra.allocator.pools import PoolCache
from pkg.dra.explain.render import describe_allocation
from pkg.dra.explain.report import bounded, explain_inputs
from pkg.dra.explain.verdict import to_status
from pkg.dracontroller.internal.service.decisions import Decisions
from pkg.framework.reconcile.contract import Request

logger = logging.getLogger(__name__)


class ClaimNotCachedError(LookupError):
    """The claim is not in the controller's cache (yet, or at all): the reconciler decides which."""


NodeReader = Callable[[str], V1Node | None]
"""The Node by name, None when there is none (one GET: the controller caches no Nodes)."""


class Explainer:
    def __init__(
        self,
        *,
        decisions: Decisions,
        allocator: Allocator,
        pool_cache: PoolCache,
        nodes: NodeReader,
        max_report_bytes: int = CLAIM_EXPLANATION_MAX_REPORT_BYTES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._decisions = decisions
        self._allocators = {
            ExplanationStrategy.BEST_FIT: allocator,
            ExplanationStrategy.FIRST_FIT: Allocator(strategy=FirstFit(), pool_cache=pool_cache),
        }
        self._nodes = nodes
        self._max_report_bytes = max_report_bytes
        self._clock = clock

    def answer(self, namespace: str, spec: ClaimExplanationSpec) -> ClaimExplanationStatus:
        """The status that answers ``spec`` (without ``observedGeneration``: the caller's); raises
        :class:`ClaimNotCachedError` when the claim is not in the cache."""
        key = f"{namespace}/{spec.claim_name}"
        node: V1Node | None = None
        if spec.node:
            node = self._nodes(spec.node)
            if node is None:
                return self._error(f"node {spec.node} not found")
        began = time.perf_counter()
        taken = self._decisions.snapshot(Request(name=spec.claim_name, namespace=namespace), node=node)
        if taken is None:
            raise ClaimNotCachedError(key)
        claim, inputs = taken
        snapshot = time.perf_counter() - began
        try:
            report = explain_inputs(
                claim,
                inputs,
                allocator=self._allocators[spec.strategy],
                show_all=bool(spec.all),
                max_devices=spec.max_devices,
                # The asker may create requests in this namespace, not read claims elsewhere: the
                # claims of other namespaces that hold devices are counted, not named.
                readable=namespace.__eq__,
            )
        except Exception as err:  # a bug in the allocator or the renderer: said in the answer, logged
            logger.exception("explaining %s failed", key)
            return self._error(f"explaining {key} failed: {type(err).__name__}: {err}"[:1024])
        text, truncated = bounded(report.text, self._max_report_bytes)
        # The time an answer takes here, apart from the request's round trips (docs/performance.md).
        logger.info(
            "explained %s in %.3f s (snapshot under the decision lock %.1f ms, %d slices, report %d bytes)",
            key,
            time.perf_counter() - began,
            snapshot * 1000,
            len(inputs.slices),
            len(text.encode()),
        )
        return ClaimExplanationStatus(
            outcome=ExplanationOutcome.ALLOCATABLE
            if report.allocatable
            else ExplanationOutcome.NOT_ALLOCATABLE,
            current_allocation=None if report.current is None else describe_allocation(report.current)[:4096],
            report=text,
            truncated=truncated or None,
            retry=None if report.verdict is None or report.allocatable else report.verdict.retry,
            causes=to_status(report.verdict)
            if report.verdict is not None and report.verdict.causes
            else None,
            computed_at=self._clock(),
        )

    def not_found(self, key: str) -> ClaimExplanationStatus:
        """The answer for a claim that is not there."""
        return self._error(f"ResourceClaim {key} not found")

    def _error(self, reason: str) -> ClaimExplanationStatus:
        return ClaimExplanationStatus(
            outcome=ExplanationOutcome.ERROR, reason=reason, computed_at=self._clock()
        )
