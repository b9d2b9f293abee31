"""Step 3, enrich: the capability snapshot and the live driver state of a readable card.

A read failure of this card is recorded, not raised: the apply step then keeps the fields as they
are (it restates them) and still writes the health verdict, and the reconcile fails afterwards so
the card is retried with backoff. Other cards are reconciled separately and never see it.
"""

from __future__ import annotations

import logging

from pkg.backends.backend import BackendError, VendorBackend
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState

logger = logging.getLogger(__name__)


class EnrichHandler:
    name = "enrich"

    def __init__(self, *, backend: VendorBackend) -> None:
        self._backend = backend

    def handle(self, state: EnrichmentState) -> Result | None:
        if state.readiness is not Readiness.READY:
            return None
        try:
            state.enrichment = self._backend.enrich(state.gpu)
        except BackendError as exc:
            logger.warning(
                "could not read the card; keeping its last snapshot: %s",
                exc,
                extra={"physical_gpu": state.name, "pci_address": exc.address, "reason": exc.reason},
            )
            state.failures.append(exc)
        return None
