"""Step 5, card specs: the offer builder's description of the card, for the publisher.

A readable card's :class:`~pkg.dra.model.card.Card` is stored in
:class:`~pkg.gpuhandler.enrichment.card_specs.CardSpecs`; a card that is not readable keeps its last
description, marked not ready; a card held for VFIO keeps its description as it is. A read
failure is recorded like the enrichment's.
"""

from __future__ import annotations

import logging

from pkg.backends.backend import BackendError, VendorBackend
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState

logger = logging.getLogger(__name__)


class CardSpecHandler:
    name = "card-specs"

    def __init__(self, *, backend: VendorBackend, card_specs: CardSpecs) -> None:
        self._backend = backend
        self._card_specs = card_specs

    def handle(self, state: EnrichmentState) -> Result | None:
        if state.readiness is Readiness.HELD:  # passed through for a claim: still on offer as it was
            return None
        if state.readiness is not Readiness.READY:
            self._card_specs.mark_unready(state.name)
            return None
        if state.failures:  # the card did not answer in this pass; keep what we had
            return None
        try:
            card = self._backend.offer_inputs(state.gpu)
        except BackendError as exc:
            logger.warning(
                "could not describe the card for offers: %s", exc, extra={"physical_gpu": state.name}
            )
            state.failures.append(exc)
            return None
        self._card_specs.put(state.name, card)
        return None
