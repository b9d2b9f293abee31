"""Step 2, health: ``HardwareHealthy`` from the backend's checks, for a readable card.

Runs before the enrichment so that a card whose reads fail (a GPU fallen off the bus) still gets
its verdict written. The backend's ``health`` does not raise for a failed check (it says
``Unknown``), so a failure here is a bug and stops the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pkg.backends.backend import VendorBackend
from pkg.framework.reconcile.conditions import now_utc
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.internal.state import EnrichmentState, Readiness, health_condition


class HealthHandler:
    name = "health"

    def __init__(self, *, backend: VendorBackend, now: Callable[[], datetime] = now_utc) -> None:
        self._backend = backend
        self._now = now

    def handle(self, state: EnrichmentState) -> Result | None:
        if state.readiness is Readiness.READY:
            report = self._backend.health(state.gpu)
            state.health = health_condition(state.gpu, report, now=self._now())
        return None
