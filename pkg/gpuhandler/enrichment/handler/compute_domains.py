"""The compute-domains step (after enrich): the card's ``ComputeDomainsReady`` condition.

From the node's channel standing (:mod:`pkg.gpuhandler.enrichment.compute_domains`) for a card
this pass read in a multi-node NVLink fabric; no condition for a card in none, which the apply
step then removes. Where this pass cannot tell — the card was not read, or no publish pass has
decided yet — the card keeps the condition it has.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from api.gpu.v1alpha1 import PhysicalGPUConditionType
from pkg.framework.reconcile.conditions import find_condition, now_utc
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.compute_domains import NodeChannels, compute_domains_condition
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState


class ComputeDomainsHandler:
    name = "compute-domains"

    def __init__(self, *, channels: NodeChannels | None, now: Callable[[], datetime] = now_utc) -> None:
        self._channels = channels
        self._now = now

    def handle(self, state: EnrichmentState) -> Result | None:
        status = state.gpu.status
        state.compute_domains = find_condition(
            status.conditions if status else None, PhysicalGPUConditionType.COMPUTE_DOMAINS_READY
        )
        standing = self._channels.standing() if self._channels is not None else None
        if standing is None or state.readiness is not Readiness.READY or state.enrichment is None:
            return None
        nvidia = state.enrichment.nvidia
        if nvidia is None or nvidia.fabric is None:
            state.compute_domains = None
            return None
        state.compute_domains = compute_domains_condition(state.gpu, standing, now=self._now())
        return None
