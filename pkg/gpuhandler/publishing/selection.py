"""Which of this node's cards are offered, and in which modes.

A card is offered only when every one of these holds:

* the enrichment has described it (a :class:`~pkg.gpuhandler.enrichment.card_specs.CardEntry`)
  and found it readable (``ready``);
* its PhysicalGPU is this backend's card, bound to the backend's driver, with ``DriverReady=True``
  (:func:`~pkg.gpuhandler.enrichment.readiness.readiness`), and not being deleted.

Health does not withhold a card: an unhealthy card stays on offer with device taints
(:mod:`pkg.gpuhandler.health.taints`), so a blip does not withdraw every offer of the card, the
claims already on it keep their devices, and an admin can tolerate a degraded card.

A card passed through to a VM for a claim (``holds``,
:class:`~pkg.gpuhandler.enrichment.readiness.Holds`) stays offered as last described although NVML
cannot read it: it is allocated, not gone.

Why both the entry and the object: the entry holds what the offers are made of (engine counts and
placements, which the PhysicalGPU schema lacks), while the cached object carries the freshest
verdicts. A validator withdrawing ``DriverReady`` reaches the cache at once; the entry follows only
at the card's next enrichment pass.

MIG offers additionally need a card that supports MIG (the backend reported profiles with
placements) and a Node whose label ``gpu.deckhouse.io/allow-mig`` is not ``false``: an absent label
allows MIG (MIG is on by default wherever the card supports it). The Physical and shared offers of an
offered card are always published.

Pure functions over plain inputs, so the publishing loop and ``gpu-handler offers`` (which has no
cluster) decide identically.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubernetes.client import V1Node

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.dra.model.card import Card
from pkg.dra.model.limits import SliceLimitError
from pkg.dra.model.offers import CardOffers, build_offers
from pkg.gpuhandler.enrichment.card_specs import CardEntry
from pkg.gpuhandler.enrichment.readiness import Holds, Readiness, readiness

logger = logging.getLogger(__name__)

LABEL_ALLOW_MIG: Final = "gpu.deckhouse.io/allow-mig"


def mig_allowed_on(node: V1Node | None) -> bool:
    """The Node's MIG decision: allowed unless its ``allow-mig`` label says ``false`` (any case)."""
    labels = (node.metadata.labels if node is not None and node.metadata is not None else None) or {}
    return labels.get(LABEL_ALLOW_MIG, "").strip().lower() != "false"


@dataclass(frozen=True)
class Selection:
    """The cards to offer (``mig_allowed`` decided) and, by PhysicalGPU name, why others are not."""

    cards: tuple[Card, ...] = ()
    withheld: Mapping[str, str] = field(default_factory=dict)


def select_cards(
    *,
    entries: Mapping[str, CardEntry],
    gpus: Mapping[str, PhysicalGPU],
    pci_vendor_id: str,
    driver_type: DriverType,
    allow_mig: bool,
    holds: Holds | None = None,
) -> Selection:
    """The offerable cards among ``entries`` (keyed by PhysicalGPU name), in name order.

    ``gpus`` are this node's cached PhysicalGPUs by name; ``pci_vendor_id`` and ``driver_type``
    are the backend's. Cards of another vendor, or not described yet, are neither offered nor
    reported as withheld: they are not this backend's to offer.
    """
    cards: list[Card] = []
    withheld: dict[str, str] = {}
    for name, entry in sorted(entries.items()):
        reason = _withheld_because(entry, gpus.get(name), pci_vendor_id, driver_type, holds)
        if reason is not None:
            withheld[name] = reason
            continue
        mig = allow_mig and bool(entry.card.mig_profiles)
        cards.append(dataclasses.replace(entry.card, mig_allowed=mig))
    return Selection(cards=tuple(cards), withheld=withheld)


def _withheld_because(
    entry: CardEntry,
    gpu: PhysicalGPU | None,
    pci_vendor_id: str,
    driver_type: DriverType,
    holds: Holds | None,
) -> str | None:
    if gpu is None:
        return "its PhysicalGPU is not in the cache"
    if gpu.metadata.deletion_timestamp is not None:
        return "its PhysicalGPU is being deleted"
    verdict = readiness(gpu, pci_vendor_id=pci_vendor_id, driver_type=driver_type, holds=holds)
    if verdict not in (Readiness.READY, Readiness.HELD):
        return f"not readable: DriverReady is not True or the card is not bound to the {driver_type} driver"
    if not entry.ready:
        return "the enrichment has not read it since it became ready"
    return None


def build_card_offers(cards: Sequence[Card]) -> list[CardOffers]:
    """Every card's offers; a card the API would refuse is logged and left out, the rest go on.

    A :class:`~pkg.dra.model.limits.SliceLimitError` is a bug in the offer model for one GPU
    model; withholding that card keeps the node's other cards on offer.
    """
    offers: list[CardOffers] = []
    for card in cards:
        try:
            offers.append(build_offers(card))
        except SliceLimitError as exc:
            logger.error(
                "card left out of the ResourceSlices: %s",
                exc,
                extra={"physicalgpu": card.physical_gpu, "pci_address": card.pci_address},
            )
    return offers


def ready_but_undescribed(
    *,
    entries: Mapping[str, CardEntry],
    gpus: Mapping[str, PhysicalGPU],
    pci_vendor_id: str,
    driver_type: DriverType,
) -> list[str]:
    """Names of cards the cache says are readable but the enrichment has not described yet.

    The publishing loop waits for these after start-up, so that a restart does not withdraw every
    offer only to publish them again a few seconds later.
    """
    return sorted(
        name
        for name, gpu in gpus.items()
        if name not in entries
        and readiness(gpu, pci_vendor_id=pci_vendor_id, driver_type=driver_type) is Readiness.READY
    )
