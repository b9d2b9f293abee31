"""A MIG device: the card in MIG mode, the GPU and compute instance at the offer's placement.

The placement in the claim's record identifies the device, before and after it exists: creating
where the same profile already sits completes it (a Prepare that died between the GPU and the
compute instance is simply run again), and releasing destroys what sits at the placement,
whether or not the record got as far as the instance IDs. A card switches to MIG mode only when
no other claim uses it and no process runs on it; the card stays in MIG mode after its last MIG
device goes, so the next MIG claim needs no switch. MIG devices fit together on a card when
their placements do not overlap. At start-up, a MIG device on one of the node's cards that no
record owns (a crash between create and record, a reboot's leftovers) is destroyed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from pydantic import Field

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, DeviceRecord, KindRecord
from pkg.gpuhandler.preparation.kinds import (
    MAX_SLOTS,
    ClaimWork,
    Conflict,
    DeviceKind,
    NodeReport,
    Offer,
    OfferMatch,
    PlanContext,
    PlanError,
    devices_of,
    record_of,
    require_free,
)

logger = logging.getLogger(__name__)

MAX_PROFILE_ID: Final = 1 << 16
ORPHANS: Final = "orphan MIG devices removed"
FIELD: Final = "mig"


class MigRecord(KindRecord):
    """A MIG device made for a claim: the GPU instance at the offer's placement and its compute
    instance. ``gpu_instance`` is ``None`` until created (the placement alone then identifies it)."""

    profile_id: int = Field(alias="profileID")
    placement_start: int = Field(alias="placementStart")
    placement_size: int = Field(alias="placementSize")
    gpu_instance: int | None = Field(default=None, alias="gpuInstance")
    compute_instance: int | None = Field(default=None, alias="computeInstance")
    uuid: str | None = None

    @property
    def slots(self) -> set[int]:
        return set(range(self.placement_start, self.placement_start + self.placement_size))


class MigKind(DeviceKind):
    name = "MIG device"
    offers = OfferMatch("MIG")
    record_field = FIELD
    record_model = MigRecord
    node_step = "orphan-mig-devices"

    def __init__(self, preparer: CardPreparer) -> None:
        self._preparer = preparer

    def plan(self, offer: Offer, context: PlanContext) -> MigRecord:
        profile_id = offer.bounded("profileID", 0, MAX_PROFILE_ID)
        start = offer.bounded("placementStart", 0, MAX_SLOTS - 1)
        size = offer.bounded("placementSize", 1, MAX_SLOTS)
        if start + size > MAX_SLOTS:
            raise PlanError(f"{offer.where} has placement {start}+{size}, beyond a card's {MAX_SLOTS} slots")
        return MigRecord(profile_id=profile_id, placement_start=start, placement_size=size)

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        mine, theirs = record_of(device, MigKind, MigRecord), record_of(held, MigKind, MigRecord)
        return (
            Conflict("DoubleAllocation", "overlaps a prepared MIG device")
            if mine.slots & theirs.slots
            else None
        )

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        mig = record_of(device, MigKind, MigRecord)
        card = device.card
        if not self._preparer.mig_enabled(card):
            require_free(self._preparer, card, work, to="to MIG mode")
            self._preparer.set_mig_mode(card, enabled=True)
            work.mig_mode_changed(card, found=False)
        made = self._preparer.create_mig_device(
            card, profile_id=mig.profile_id, start=mig.placement_start, size=mig.placement_size
        )
        # Recorded with the claim's completion; until then the placement is what makes the device
        # this claim's.
        mig.gpu_instance, mig.compute_instance, mig.uuid = made.gpu_instance, made.compute_instance, made.uuid
        return self._preparer.mig_edits(card, made)

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        mig = record_of(device, MigKind, MigRecord)
        if self._preparer.destroy_mig_device(device.card, start=mig.placement_start):
            work.changed_cards.add(device.card)

    def reconcile_node(self, checkpoint: CheckpointData, cards: Sequence[str]) -> NodeReport:
        """Destroys the MIG devices on ``cards`` that no record owns, in any state."""
        report = NodeReport()
        owned = {
            (d.card, record_of(d, MigKind, MigRecord).placement_start)
            for _, d in devices_of(checkpoint, self)
        }
        for card in cards:
            try:
                found = self._preparer.mig_devices(card)
            except Exception as exc:  # a card the vendor library cannot see now (e.g. on vfio-pci)
                logger.warning("cannot list MIG devices of %s: %s", card, exc)
                continue
            for device in found:
                if (card, device.start) in owned:
                    continue
                try:
                    self._preparer.destroy_mig_device(card, start=device.start)
                except Exception as exc:
                    report.failed.append((card, str(exc)))
                    continue
                report.add(ORPHANS, f"{card}@{device.start}")
                report.changed_cards.add(card)
                logger.info(
                    "removed a MIG device no claim owns", extra={"pci_address": card, "start": device.start}
                )
        return report


def mig_record(device: DeviceRecord) -> MigRecord | None:
    """``device``'s MIG record, for the readers of the checkpoint that report MIG devices (the
    prepared-device metric, the attribution), or None for a device of another kind."""
    return device.kind_record(FIELD, MigRecord)
