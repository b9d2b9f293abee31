"""What an enrichment pass knows: the readiness verdict, the owned fields, the per-pass state."""

from pkg.gpuhandler.internal.state.enrichment import EnrichmentState
from pkg.gpuhandler.internal.state.owned import OwnedStatus, health_condition, owned_of
from pkg.gpuhandler.internal.state.readiness import Readiness, readiness

__all__ = ["EnrichmentState", "OwnedStatus", "Readiness", "health_condition", "owned_of", "readiness"]
