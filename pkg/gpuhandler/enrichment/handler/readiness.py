"""Step 1, readiness: is this the backend's card, and may it be read now?

A card of another vendor (or one the node agent has not described yet) ends the chain: nothing
is read or written for it. Otherwise the verdict goes into the state, and the later steps act on
it (see :mod:`pkg.gpuhandler.enrichment.readiness`).
"""

from __future__ import annotations

from pkg.backends.backend import VendorBackend
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.readiness import Holds, Readiness, readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState


class ReadinessHandler:
    name = "readiness"

    def __init__(self, *, backend: VendorBackend, holds: Holds | None = None) -> None:
        self._vendor_id = backend.identity.pci_vendor_id
        self._driver_type = backend.driver_type
        self._holds = holds

    def handle(self, state: EnrichmentState) -> Result | None:
        state.readiness = readiness(
            state.gpu, pci_vendor_id=self._vendor_id, driver_type=self._driver_type, holds=self._holds
        )
        if state.readiness is Readiness.FOREIGN:
            raise StopHandlerChain(reason="not a card of this backend, or no pciInfo yet")
        return None
