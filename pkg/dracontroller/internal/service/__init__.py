"""I/O of the allocation controller: cache reads (:class:`Inventory`), writes (:class:`ClaimWriter`)
and the ledger of writes the caches have not shown yet (:class:`InFlight`)."""

from pkg.dracontroller.internal.service.claim_writer import ClaimWriter, ClaimWrites
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.dracontroller.internal.service.inventory import Inventory

__all__ = ["ClaimWriter", "ClaimWrites", "InFlight", "Inventory"]
