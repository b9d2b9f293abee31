"""Giving a claim's devices back: what Unprepare, a rolled-back Prepare and start-up share.

A claim's record names its cards and, for MIG devices, their placements; releasing destroys the
MIG devices found at those placements (whether or not the record got as far as their instance
IDs — a Prepare that died after creating one still owns it by placement) and leaves whole cards
as they are. Everything here is idempotent: what is already gone is success.
"""

from __future__ import annotations

from pkg.backends.preparation import CardPreparer
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord


def release_devices(record: ClaimRecord, preparer: CardPreparer) -> list[str]:
    """Destroys the claim's MIG devices, last first; returns the cards whose devices were destroyed."""
    changed = []
    for device in reversed(record.devices):
        if device.mig is not None and preparer.destroy_mig_device(
            device.card, start=device.mig.placement_start
        ):
            changed.append(device.card)
    return changed
