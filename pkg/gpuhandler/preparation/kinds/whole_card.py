"""A whole card, exclusively: the card out of MIG mode, and the card's device nodes for the container.

A card left in MIG mode without MIG devices (the last MIG claim on it went, and the mode stayed
so the next MIG claim needs no switch) leaves MIG mode first; a card with MIG devices cannot be
handed out whole. Releasing a whole card changes nothing: it stays as it is for the next claim.
Shares and passed-through cards take the card the same way (:func:`take_whole_card`). The kind
has no record of its own: a device without any kind's record is a whole card.
"""

from __future__ import annotations

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork, DeviceKind, OfferMatch


def take_whole_card(preparer: CardPreparer, device: DeviceRecord, work: ClaimWork) -> None:
    """Makes sure ``device``'s card is out of MIG mode; refuses a card that has MIG devices."""
    card = device.card
    if not preparer.mig_enabled(card):
        return
    if preparer.mig_devices(card):
        raise PrepareFailedError(
            "CardInMigUse", f"{work.label}: card {card} has MIG devices; a whole-card claim cannot use it"
        )
    preparer.set_mig_mode(card, enabled=False)
    work.mig_mode_changed(card, found=True)


class WholeCardKind(DeviceKind):
    name = "whole card"
    offers = OfferMatch("Physical", shared=False)

    def __init__(self, preparer: CardPreparer) -> None:
        self._preparer = preparer

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        take_whole_card(self._preparer, device, work)
        return self._preparer.card_edits(device.card)

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        """Nothing to undo: the card stays out of MIG mode, ready for the next claim."""
