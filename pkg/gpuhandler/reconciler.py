"""The enrichment as a reconciler: one request per PhysicalGPU of this node.

Why per card rather than one ``sync`` for the node (as the node agent does): each card is read
through the backend on its own, a card whose reads fail must be retried with its own backoff
while the others carry on, and the framework's queue gives exactly that per request (never two
passes of one card at once, different cards in parallel).

A pass reads the object from the informer cache (never the event), runs the handler chain over a
fresh :class:`~pkg.gpuhandler.internal.state.EnrichmentState`, then:

* a read failure recorded by a step raises :class:`EnrichmentFailedError` after the writes, so
  the health verdict and the kept snapshot are stored and the controller retries with backoff;
* a readable card comes back after the re-enrichment period (jittered), which refreshes what NVML
  changes without an API event (power limits, MIG mode, health);
* a card that is not readable waits for its next event (DriverReady or the driver changing);
* a card gone from the cache is forgotten by the card store.

Why not the framework's ``ResourceReconciler``: it writes a status with a full PUT, which takes
every field of the status; the enrichment must own only its own fields, which takes an apply.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from datetime import timedelta

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.backends.backend import BackendError
from pkg.framework.reconcile import BaseReconciler, Handler
from pkg.framework.reconcile.contract import Request, Result
from pkg.gpuhandler.card_specs import CardSpecs
from pkg.gpuhandler.internal.state import EnrichmentState, Readiness

logger = logging.getLogger(__name__)


class EnrichmentFailedError(Exception):
    """Some reads of one card failed; what could be written was written."""

    def __init__(self, name: str, failures: Sequence[BackendError]) -> None:
        super().__init__(f"PhysicalGPU {name}: {'; '.join(map(str, failures))}")
        self.name = name
        self.failures = tuple(failures)


class EnrichmentReconciler:
    """Runs the enrichment chain for one PhysicalGPU per request."""

    def __init__(
        self,
        *,
        node_label: str,
        get_gpu: Callable[[str], PhysicalGPU | None],
        handlers: Sequence[Handler[EnrichmentState]],
        cards: CardSpecs,
        period: float,
        jitter: float = 0.1,
        rand: Callable[[float, float], float] = random.uniform,
    ) -> None:
        if period <= 0 or not 0 <= jitter < 1:
            raise ValueError(f"need period > 0 and 0 <= jitter < 1, got period={period} jitter={jitter}")
        self._node_label = node_label
        self._get = get_gpu
        self._chain = BaseReconciler(handlers)
        self._cards = cards
        self._period = period
        self._jitter = jitter
        self._rand = rand

    def reconcile(self, request: Request) -> Result:
        gpu = self._get(request.name)
        if gpu is None or (gpu.metadata.labels or {}).get(LABEL_NODE) != self._node_label:
            self._cards.remove(request.name)
            return Result()
        state = EnrichmentState(gpu=gpu)
        outcome = self._chain.handle(state)
        if outcome.error is not None:
            raise outcome.error
        if state.failures:
            raise EnrichmentFailedError(request.name, state.failures)
        log = logger.info if state.writes else logger.debug
        log("card enriched", extra={"physical_gpu": request.name, "readiness": state.readiness.value})
        if state.readiness is not Readiness.READY:
            return Result()
        return Result(requeue_after=timedelta(seconds=self.next_period()))

    def next_period(self) -> float:
        return self._period * self._rand(1 - self._jitter, 1 + self._jitter)
