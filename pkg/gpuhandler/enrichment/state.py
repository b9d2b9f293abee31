"""The state one enrichment pass works on: the cached object and what the handlers found.

Built per reconcile from the informer cache. ``gpu`` is the cached object and is never edited;
handlers fill in the other fields in chain order (readiness → health → enrich → fabric → compute
domains → apply → card specs) and record a card's read failures in ``failures`` instead of
raising, so the steps after them still run (a lost GPU still gets ``HardwareHealthy=False``). The
reconciler raises afterwards, and the controller retries the card with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.client import V1Condition

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.backend import BackendError, Enrichment
from pkg.framework.reconcile.handler import Scratch
from pkg.gpuhandler.enrichment.readiness import Readiness


@dataclass(kw_only=True)
class EnrichmentState(Scratch):
    gpu: PhysicalGPU
    readiness: Readiness = Readiness.FOREIGN
    health: V1Condition | None = None
    # ComputeDomainsReady as it should be (None: removed); the compute-domains step sets it.
    compute_domains: V1Condition | None = None
    enrichment: Enrichment | None = None
    failures: list[BackendError] = field(default_factory=list)
    writes: int = 0

    @property
    def name(self) -> str:
        return str(self.gpu.metadata.name)
