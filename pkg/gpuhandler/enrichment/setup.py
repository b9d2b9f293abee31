"""The enrichment controller: one request per card of this node.

Woken by this node's PhysicalGPU events that matter to the enrichment (:mod:`.watches`) and by the
cards the kubelet plugin changed (:mod:`.card_changes`); the reconciler asks for the periodic
re-enrichment itself. There is no leader election: one handler runs per node and writes only that
node's objects. A card whose reads fail is retried with its own backoff while the others carry on.
"""

from __future__ import annotations

from typing import Final

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import BackendError
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.client import ApiError
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile.contract import Request
from pkg.gpuhandler.enrichment.card_changes import EnrichmentCardChanges
from pkg.gpuhandler.enrichment.reconciler import EnrichmentFailedError, EnrichmentReconciler
from pkg.gpuhandler.enrichment.watches import gpu_events

ENRICHMENT_CONTROLLER: Final = "gpu-enrichment"
# A card whose reads fail is retried after 1 s, 2 s, 4 s, ... at most 5 minutes apart.
RETRY_BASE_SECONDS: Final = 1.0
RETRY_MAX_SECONDS: Final = 300.0


def _request_for_name(name: object) -> list[Request]:
    return [Request(name=str(name))] if name else []


def setup_enrichment(
    manager: Manager,
    *,
    gpus: SharedInformer[PhysicalGPU],
    card_changes: EnrichmentCardChanges,
    reconciler: EnrichmentReconciler,
    workers: int,
) -> Controller:
    """Registers the enrichment controller and its watches with ``manager``; ``gpus`` is the
    informer of this node's PhysicalGPUs."""
    return (
        ControllerBuilder(manager, name=ENRICHMENT_CONTROLLER)
        .for_(gpus, predicates=[gpu_events()])
        .watches(card_changes.channel, EnqueueRequestsFromMapFunc(_request_for_name))
        .workers(workers)
        .without_leader_election()
        .backoff(base=RETRY_BASE_SECONDS, max_delay=RETRY_MAX_SECONDS)
        .expected_errors(ApiError, OSError, BackendError, EnrichmentFailedError)
        .complete(reconciler)
    )
