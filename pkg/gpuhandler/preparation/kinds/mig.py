"""A MIG device: the card in MIG mode, the GPU and compute instance at the offer's placement.

The placement in the claim's record identifies the device, before and after it exists: creating
where the same profile already sits completes it (a Prepare that died between the GPU and the
compute instance is simply run again), and releasing destroys what sits at the placement,
whether or not the record got as far as the instance IDs. A card switches to MIG mode only when
no other claim uses it and no process runs on it; the card stays in MIG mode after its last MIG
device goes, so the next MIG claim needs no switch.
"""

from __future__ import annotations

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.kinds import ClaimWork, require_free


class MigKind:
    name = "MIG device"
    record_field = "mig"

    def __init__(self, preparer: CardPreparer) -> None:
        self._preparer = preparer

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        mig = device.mig
        assert mig is not None
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
        assert device.mig is not None
        if self._preparer.destroy_mig_device(device.card, start=device.mig.placement_start):
            work.changed_cards.add(device.card)
