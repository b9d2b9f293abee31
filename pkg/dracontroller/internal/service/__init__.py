"""I/O of the allocation controller: cache reads (:class:`CacheReader`), writes (:class:`ClaimWriter`),
the record of writes the caches have not shown yet (:class:`InFlight`), the decisions taken
under its lock (:class:`Decisions`), the check of the Pods that reference a claim
(:class:`PodReferenceBarrier`, falling back to the consistent read
:class:`PodReferenceReader`) and the Event that hands a claim over to the scheduler
(:class:`Handover`)."""

from pkg.dracontroller.internal.service.cache_reader import CacheReader
from pkg.dracontroller.internal.service.claim_writer import ClaimWriter, ClaimWrites
from pkg.dracontroller.internal.service.decisions import (
    AfterWrite,
    AfterWriteChecks,
    AllocationDecision,
    Decisions,
    Release,
    YieldCheck,
)
from pkg.dracontroller.internal.service.handover import FoundBy, Handover
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.dracontroller.internal.service.pod_references import (
    PodReferenceBarrier,
    PodReferenceReader,
    PodReferences,
)

__all__ = [
    "AfterWrite",
    "AfterWriteChecks",
    "AllocationDecision",
    "CacheReader",
    "ClaimWriter",
    "ClaimWrites",
    "Decisions",
    "FoundBy",
    "Handover",
    "InFlight",
    "PodReferenceBarrier",
    "PodReferenceReader",
    "PodReferences",
    "Release",
    "YieldCheck",
]
