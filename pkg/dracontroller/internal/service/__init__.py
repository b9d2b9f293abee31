"""I/O of the allocation controller: cache reads (:class:`Inventory`), writes (:class:`ClaimWriter`),
the record of writes the caches have not shown yet (:class:`InFlight`), the decisions taken
under its lock (:class:`Decisions`), the consistent read of the Pods that reference a claim
(:class:`PodReferenceReader`) and the Event that hands a claim over to the scheduler
(:class:`Handover`)."""

from pkg.dracontroller.internal.service.claim_writer import ClaimWriter, ClaimWrites
from pkg.dracontroller.internal.service.decisions import AllocationDecision, Decisions, Release, YieldCheck
from pkg.dracontroller.internal.service.handover import FoundBy, Handover
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.dracontroller.internal.service.inventory import Inventory
from pkg.dracontroller.internal.service.pod_references import PodReferenceReader, PodReferences

__all__ = [
    "AllocationDecision",
    "ClaimWriter",
    "ClaimWrites",
    "Decisions",
    "FoundBy",
    "Handover",
    "InFlight",
    "Inventory",
    "PodReferenceReader",
    "PodReferences",
    "Release",
    "YieldCheck",
]
