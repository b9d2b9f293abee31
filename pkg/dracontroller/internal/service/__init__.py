"""I/O of the allocation controller: cache reads (:class:`Inventory`), writes (:class:`ClaimWriter`),
the ledger of writes the caches have not shown yet (:class:`InFlight`) and the decisions taken
under its lock (:class:`Decisions`)."""

from pkg.dracontroller.internal.service.claim_writer import ClaimWriter, ClaimWrites
from pkg.dracontroller.internal.service.decisions import AllocationDecision, Decisions, Release, YieldCheck
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.dracontroller.internal.service.inventory import Inventory

__all__ = [
    "AllocationDecision",
    "ClaimWriter",
    "ClaimWrites",
    "Decisions",
    "InFlight",
    "Inventory",
    "Release",
    "YieldCheck",
]
