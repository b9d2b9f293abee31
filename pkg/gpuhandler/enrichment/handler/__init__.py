"""The enrichment's steps, one per module; :mod:`pkg.gpuhandler.enrichment.chain` puts them in order:
readiness → health → enrich → fabric → compute domains → apply → card specs."""

from pkg.gpuhandler.enrichment.handler.apply import ApplyHandler
from pkg.gpuhandler.enrichment.handler.card_specs import CardSpecHandler
from pkg.gpuhandler.enrichment.handler.compute_domains import ComputeDomainsHandler
from pkg.gpuhandler.enrichment.handler.enrich import EnrichHandler
from pkg.gpuhandler.enrichment.handler.fabric import FabricHandler
from pkg.gpuhandler.enrichment.handler.health import HealthHandler
from pkg.gpuhandler.enrichment.handler.readiness import ReadinessHandler

__all__ = [
    "ApplyHandler",
    "CardSpecHandler",
    "ComputeDomainsHandler",
    "EnrichHandler",
    "FabricHandler",
    "HealthHandler",
    "ReadinessHandler",
]
