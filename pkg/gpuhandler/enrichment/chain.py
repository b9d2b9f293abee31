"""The enrichment's handler chain, declared once: readiness → health → enrich → fabric →
compute domains → apply → card specs.

The gpu-handler's container and the offline ``offers`` command both build their chain here, so
the command computes exactly what a node's handler would write and offer. The order matters:
health runs before the reads so that a card whose reads fail still gets its verdict, and the card
specs come last so that they see whether this pass could read the card.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pkg.backends.backend import VendorBackend
from pkg.framework.reconcile import Handler
from pkg.framework.reconcile.conditions import now_utc
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.compute_domains import NodeChannels
from pkg.gpuhandler.enrichment.handler import (
    ApplyHandler,
    CardSpecHandler,
    ComputeDomainsHandler,
    EnrichHandler,
    FabricHandler,
    HealthHandler,
    ReadinessHandler,
)
from pkg.gpuhandler.enrichment.handler.card_specs import PciTopology
from pkg.gpuhandler.enrichment.readiness import Holds
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.enrichment.status_writer import StatusWriter
from pkg.gpuhandler.health import HealthTracker


def enrichment_handlers(
    *,
    backend: VendorBackend,
    tracker: HealthTracker,
    writer: StatusWriter,
    card_specs: CardSpecs,
    topology: PciTopology,
    holds: Holds | None = None,
    channels: NodeChannels | None = None,
    now: Callable[[], datetime] = now_utc,
) -> list[Handler[EnrichmentState]]:
    """The steps of one pass, in order. ``holds`` (None: no card is held) knows the cards passed
    through for claims; ``channels`` (None: never decided) the node's IMEX channel standing, for
    ``ComputeDomainsReady``; ``now`` is the conditions' clock; ``topology`` says where a
    card sits on the host (its PCIe root and NUMA node, for the offers)."""
    return [
        ReadinessHandler(backend=backend, holds=holds),
        HealthHandler(backend=backend, tracker=tracker, now=now),
        EnrichHandler(backend=backend),
        FabricHandler(faults=tracker.fabric),
        ComputeDomainsHandler(channels=channels, now=now),
        ApplyHandler(writer=writer),
        CardSpecHandler(backend=backend, card_specs=card_specs, topology=topology),
    ]
