"""The enrichment as a reconciler: one request per PhysicalGPU of this node.

Why per card rather than one ``sync`` for the node (as the node agent does): each card is read
through the backend on its own, a card whose reads fail must be retried with its own backoff
while the others carry on, and the framework's queue gives exactly that per request (never two
passes of one card at once, different cards in parallel).

A pass reads the object from the informer cache (never the event), runs the handler chain over a
fresh :class:`~pkg.gpuhandler.enrichment.state.EnrichmentState`, then:

* a read failure recorded by a step raises :class:`EnrichmentFailedError` after the writes, so
  the health verdict and the kept snapshot are stored and the controller retries with backoff;
* a readable card comes back after the re-enrichment period (jittered), which refreshes what NVML
  changes without an API event (power limits, MIG mode, health);
* a card that is not readable waits for its next event (DriverReady or the driver changing);
* a card gone from the cache is forgotten by the card specs.

It is the framework's :class:`~pkg.framework.reconcile.ObjectReconciler` *without a writer*: the
``Resource`` writer PUTs a whole status, which takes every field of it; the enrichment must own
only its own fields, which takes a server-side apply, done by the apply step through the status
writer service. The state is a scratch blackboard (:class:`~pkg.framework.reconcile.Scratch`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from datetime import timedelta

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.backends.backend import BackendError
from pkg.framework.jitter import Jitter
from pkg.framework.reconcile import ChainOutcome, Handler, ObjectReconciler, Request, Result
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState

logger = logging.getLogger(__name__)


class EnrichmentFailedError(Exception):
    """Some reads of one card failed; what could be written was written."""

    def __init__(self, name: str, failures: Sequence[BackendError]) -> None:
        super().__init__(f"PhysicalGPU {name}: {'; '.join(map(str, failures))}")
        self.name = name
        self.failures = tuple(failures)


class EnrichmentReconciler(ObjectReconciler[PhysicalGPU, EnrichmentState]):
    """Runs the enrichment chain for one PhysicalGPU per request."""

    def __init__(
        self,
        *,
        node_label: str,
        get_gpu: Callable[[str], PhysicalGPU | None],
        handlers: Sequence[Handler[EnrichmentState]],
        card_specs: CardSpecs,
        period: float,
        jitter: float = 0.1,
        rand: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self._node_label = node_label
        self._get_gpu = get_gpu
        self._card_specs = card_specs
        self._every = Jitter(period=period, jitter=jitter, rand=rand)
        super().__init__(
            get=self._mine,
            state=lambda gpu: EnrichmentState(gpu=gpu),
            handlers=handlers,
            conclude=self.conclude,
            on_missing=self._forget,
        )

    def _mine(self, request: Request) -> PhysicalGPU | None:
        """The cached object, if it is still this node's (a relabelled card is as good as gone)."""
        gpu = self._get_gpu(request.name)
        if gpu is None or (gpu.metadata.labels or {}).get(LABEL_NODE) != self._node_label:
            return None
        return gpu

    def _forget(self, request: Request) -> Result:
        self._card_specs.remove(request.name)
        return Result()

    def conclude(self, state: EnrichmentState, outcome: ChainOutcome[EnrichmentState]) -> Result:
        if outcome.error is not None:
            raise outcome.error
        if state.failures:
            raise EnrichmentFailedError(state.name, state.failures)
        log = logger.info if state.writes else logger.debug
        log("card enriched", extra={"physical_gpu": state.name, "readiness": state.readiness.value})
        if state.readiness is not Readiness.READY:
            return Result()
        return Result(requeue_after=timedelta(seconds=self._every.next()))
