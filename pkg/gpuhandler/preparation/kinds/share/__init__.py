"""A TimeSlicing or MPS share of a whole card: the card's shared setting, and the share's limits.

A share takes the card whole (out of MIG mode, :func:`~.whole_card.take_whole_card`); what the
card needs for its shares — the time slice, the MPS control daemon — is set up by the first share
and undone by the last (:class:`~pkg.gpuhandler.preparation.sharing.CardSharing`), so releasing a
share undoes it only when no other claim's share of that strategy is left on the card.
"""

from __future__ import annotations

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.kinds import ClaimWork
from pkg.gpuhandler.preparation.kinds.whole_card import take_whole_card
from pkg.gpuhandler.preparation.sharing import CardSharing


class ShareKind:
    name = "share"
    record_field = "sharing"

    def __init__(self, *, preparer: CardPreparer, sharing: CardSharing) -> None:
        self._preparer = preparer
        self._sharing = sharing

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        take_whole_card(self._preparer, device, work)
        return self._sharing.set_up(device)

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        self._sharing.release(device, others=work.others_on(device.card))
