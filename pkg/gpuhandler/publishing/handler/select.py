"""Step 3: which cards to offer (:mod:`~pkg.gpuhandler.publishing.selection`), and why not the others.

Why a card is withheld is logged once per change of reason, and once when it is offered again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from api.gpu.v1alpha1 import DriverType
from pkg.framework.reconcile import Result
from pkg.gpuhandler.enrichment.readiness import Holds
from pkg.gpuhandler.publishing.selection import mig_allowed_on, select_cards
from pkg.gpuhandler.publishing.state import PublishState

logger = logging.getLogger("pkg.gpuhandler.publishing.reconciler")


class SelectHandler:
    name = "select"

    def __init__(self, *, pci_vendor_id: str, driver_type: DriverType, holds: Holds | None = None) -> None:
        self._vendor = pci_vendor_id
        self._driver = driver_type
        self._holds = holds

    def handle(self, state: PublishState) -> Result | None:
        if state.node is None:
            raise LookupError("the node step lets no pass without a Node through")
        selection = select_cards(
            entries=state.entries,
            gpus=state.gpus,
            pci_vendor_id=self._vendor,
            driver_type=self._driver,
            allow_mig=mig_allowed_on(state.node),
            holds=self._holds,
        )
        self._log_withheld(state, selection.withheld, offered={c.physical_gpu for c in selection.cards})
        state.selection = selection
        return None

    def _log_withheld(self, state: PublishState, withheld: Mapping[str, str], *, offered: set[str]) -> None:
        before = state.memory.withheld
        for name, reason in sorted(withheld.items()):
            if before.get(name) != reason:
                logger.info(
                    "card not offered: %s", reason, extra={"node": state.node_name, "physicalgpu": name}
                )
        for name in sorted(set(before) & offered):
            logger.info("card offered again", extra={"node": state.node_name, "physicalgpu": name})
        state.memory.withheld = dict(withheld)
