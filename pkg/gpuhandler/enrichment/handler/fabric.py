"""The fabric step (after enrich): the card's multi-node NVLink fabric to the node's fabric faults.

The enrich step read the card's fabric with everything else (``currentState.nvidia.fabric``);
this step hands it to :class:`~pkg.gpuhandler.health.fabric.FabricFaults`, whose change wakes the
publisher, so a fabric that stops being Ready taints the card's offers within one pass, and one
that recovers lifts the taint as fast. A card that could not be read in this pass keeps what was
known (a read failure is not a recovery); a card not ready for reads is not offered anyway.
"""

from __future__ import annotations

from pkg.backends.backend import pci_address
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.health.fabric import FabricFaults


class FabricHandler:
    name = "fabric"

    def __init__(self, *, faults: FabricFaults) -> None:
        self._faults = faults

    def handle(self, state: EnrichmentState) -> Result | None:
        if state.readiness is not Readiness.READY or state.failures or state.enrichment is None:
            return None
        nvidia = state.enrichment.nvidia
        fabric = nvidia.fabric if nvidia is not None else None
        if fabric is None:
            self._faults.observe(pci_address(state.gpu), None)
        else:
            self._faults.observe(pci_address(state.gpu), fabric.state, fabric.reasons or ())
        return None
