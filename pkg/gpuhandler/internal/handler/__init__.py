"""The enrichment's steps, one per module, in chain order: readiness → health → enrich → apply → cards."""

from pkg.gpuhandler.internal.handler.apply import ApplyHandler
from pkg.gpuhandler.internal.handler.cards import CardSpecHandler
from pkg.gpuhandler.internal.handler.enrich import EnrichHandler
from pkg.gpuhandler.internal.handler.health import HealthHandler
from pkg.gpuhandler.internal.handler.readiness import ReadinessHandler

__all__ = ["ApplyHandler", "CardSpecHandler", "EnrichHandler", "HealthHandler", "ReadinessHandler"]
