"""Step 2, health: ``HardwareHealthy`` from the backend's probe and the node's health verdict.

Runs before the enrichment so that a card whose reads fail (a GPU fallen off the bus) still gets
its verdict written. The probe's result goes into the
:class:`~pkg.gpuhandler.health.HealthTracker` first, which decides the verdict from it and the
health events: while an event's episode lasts the condition is False with the event as reason,
so the condition, the device taints and the kubelet's health stream always agree. The backend's
``health`` does not raise for a failed check (it says ``Unknown``), so a failure here is a bug
and stops the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pkg.backends.backend import VendorBackend, pci_address
from pkg.framework.reconcile.conditions import now_utc
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.owned import health_condition
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.health import HealthTracker


class HealthHandler:
    name = "health"

    def __init__(
        self, *, backend: VendorBackend, tracker: HealthTracker, now: Callable[[], datetime] = now_utc
    ) -> None:
        self._backend = backend
        self._tracker = tracker
        self._now = now

    def handle(self, state: EnrichmentState) -> Result | None:
        if state.readiness is Readiness.READY:
            probe = self._backend.health(state.gpu)
            verdict = self._tracker.probe(pci_address(state.gpu), probe)
            state.health = health_condition(state.gpu, verdict.as_verdict(probe), now=self._now())
        return None
