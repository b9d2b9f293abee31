"""A partition of a card-wide mode: the card switched to the offer's mode, and that partition's nodes.

Some cards are partitioned as a whole (every partition the same size, one mode per card) rather
than instance by instance, so the partition a claim got exists as soon as its card is in the
right mode. The mode switches only when the card is free — no other claim on it, in any state,
and no process — exactly as MIG mode does; partitions of one mode then share the card, since the
offer's counters never let another mode onto it. Nothing is made per claim, so a Prepare that
died half-way is run again as is: the switch to the mode the card is in does nothing.

Releasing the last partition of a card switches it back to the whole-card mode when the card is
free, so a whole-card claim (and the node's idle cards) find it whole; a card something still
holds is left as it is, and the next whole-card Prepare switches it instead
(:func:`~.whole_card.take_whole_card`).
"""

from __future__ import annotations

import logging
import re
from typing import Final

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord, KindRecord
from pkg.gpuhandler.preparation.kinds import (
    MAX_SLOTS,
    ClaimWork,
    Conflict,
    DeviceKind,
    Offer,
    OfferMatch,
    PlanContext,
    PlanError,
    record_of,
    require_free,
)

logger = logging.getLogger(__name__)

_MODE: Final = re.compile(r"[a-z][a-z0-9]{0,15}")  # a partition mode's name (spx, cpx)


class PartitionRecord(KindRecord):
    """A partition of a card-wide mode: the mode the card was switched to and which partition."""

    mode: str
    count: int
    index: int


class PartitionKind(DeviceKind):
    name = "partition"
    offers = OfferMatch("Partition")
    record_field = "partition"
    record_model = PartitionRecord
    reader_version = 4  # an older reader takes a partition for a whole card and never switches it back

    def __init__(self, preparer: CardPreparer) -> None:
        self._preparer = preparer

    def plan(self, offer: Offer, context: PlanContext) -> PartitionRecord:
        mode = offer.attribute("partitionMode", str)
        if not _MODE.fullmatch(mode):
            raise PlanError(f"{offer.where} has partitionMode {mode[:80]!r}, not a mode name (cpx)")
        count = offer.bounded("partitionCount", 2, MAX_SLOTS)
        index = offer.bounded("partitionIndex", 0, count - 1)
        return PartitionRecord(mode=mode, count=count, index=index)

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        mine = record_of(device, PartitionKind, PartitionRecord)
        theirs = record_of(held, PartitionKind, PartitionRecord)
        if mine.mode != theirs.mode:
            return Conflict(
                "DoubleAllocation", f"needs partition mode {mine.mode}, the card is in {theirs.mode}"
            )
        if mine.index == theirs.index:
            return Conflict("DoubleAllocation", "is a partition already prepared")
        return None

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        partition = record_of(device, PartitionKind, PartitionRecord)
        card = device.card
        found = self._preparer.partition_mode(card)
        if found != partition.mode:
            require_free(self._preparer, card, work, to=f"to partition mode {partition.mode}")
            partitioned = self._preparer.mig_enabled(card)
            self._preparer.set_partition_mode(card, partition.mode)
            if partitioned:
                work.changed_cards.add(card)
            else:  # a rolled-back Prepare puts the card back whole
                work.mig_mode_changed(card, found=False)
        return self._preparer.partition_edits(card, partition.mode, partition.index)

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        card = device.card
        # Devices are released last to first: the claim's first device on the card goes last.
        position = next(i for i, d in enumerate(work.record.devices) if d is device)
        if work.others_on(card) or any(d.card == card for d in work.record.devices[:position]):
            return  # another partition on the card: the mode stays
        if processes := list(self._preparer.processes(card)):
            logger.info("card %s stays partitioned: processes %s still hold it", card, processes)
            return
        if self._preparer.mig_enabled(card):
            self._preparer.set_partition_mode(card, None)
            work.changed_cards.add(card)
