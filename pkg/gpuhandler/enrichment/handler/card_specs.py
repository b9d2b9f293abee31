"""Step 5, card specs: the offer builder's description of the card, for the publisher.

A readable card's :class:`~pkg.dra.model.card.Card` is stored in
:class:`~pkg.gpuhandler.enrichment.card_specs.CardSpecs`; a card that is not readable keeps its last
description, marked not ready; a card held for VFIO keeps its description as it is. A read
failure is recorded like the enrichment's.

Where the card sits on the host (its PCIe root and NUMA node, docs/topology.md) is added here from
sysfs rather than by each backend: it is the same for every vendor's card, and Kubernetes defines
how it is computed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol

from pkg.backends.backend import BackendError, VendorBackend
from pkg.framework.reconcile.contract import Result
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.hardware.pci_topology import PciPlacement

logger = logging.getLogger(__name__)


class PciTopology(Protocol):
    """Where a PCI function sits (:class:`~pkg.hardware.pci_topology.SysfsPciTopology` on a node)."""

    def placement(self, address: str) -> PciPlacement: ...


class CardSpecHandler:
    name = "card-specs"

    def __init__(self, *, backend: VendorBackend, card_specs: CardSpecs, topology: PciTopology) -> None:
        self._backend = backend
        self._card_specs = card_specs
        self._topology = topology

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
        placement = self._topology.placement(card.pci_address)
        card = dataclasses.replace(card, pcie_root=placement.pcie_root, numa_node=placement.numa_node)
        self._card_specs.put(state.name, card)
        return None
