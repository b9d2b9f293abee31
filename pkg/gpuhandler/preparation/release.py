"""Releasing a claim: the one order used by a rolled-back Prepare, by Unprepare and by start-up
(the first two through :meth:`ClaimRelease.release_devices` and the CDI spec's removal as
Prepare's undos, :mod:`.prepare_steps`; Unprepare through :meth:`ClaimRelease.release`).

1. Each device by its kind (:mod:`.kinds`), last first: a share's card setting undone unless
   another claim's share needs it, a passed-through card's functions given back to their drivers
   (and the claim's VM files removed), a MIG device destroyed at its placement; a whole card stays
   as it is.
2. A card whose MIG mode this attempt switched goes back to the mode it was found in, unless
   another claim uses it now (a rolled-back Prepare knows the mode it found; when its rollback
   could not finish, its kept record says it, ``foundMigModes``, for the release that finishes).
3. The claim's CDI spec is removed.

Every part is idempotent, so releasing what was never prepared, or released already, is success.
A device whose release fails does not stop the others; the first failure is raised at the end.
The caller forgets the claim's record after this returned. When it fails, the record stays: it
still owns what is left on the node (so no orphan sweep takes it for free) and says how to give
it back (a passed-through function's original driver, the MIG mode a card was found in), for the
kubelet's retry, Unprepare or start-up to finish.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pkg.backends.preparation import CardPreparer
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord
from pkg.gpuhandler.preparation.kinds import ClaimWork, Kinds

logger = logging.getLogger(__name__)

# The extra field of a kept ``PrepareStarted`` record: the MIG mode (enabled or not) each card was
# found in by the Prepare whose rollback could not finish, so the release that finishes it (the
# kubelet's retry, Unprepare or start-up) puts the mode back.
FOUND_MIG_MODES = "foundMigModes"


class ClaimRelease:
    def __init__(self, *, kinds: Kinds, preparer: CardPreparer, cdi: CdiSpecs) -> None:
        self._kinds = kinds
        self._preparer = preparer
        self._cdi = cdi

    def release(
        self,
        record: ClaimRecord,
        checkpoint: CheckpointData,
        *,
        found_mig_modes: Mapping[str, bool] | None = None,
    ) -> set[str]:
        """Gives back what ``record`` holds (other claims: ``checkpoint``): its devices and the MIG
        modes (:meth:`release_devices`), then its CDI spec; returns the cards whose mode changed."""
        failed: list[Exception] = []
        changed: set[str] = set()
        try:
            changed = self.release_devices(record, checkpoint, found_mig_modes=found_mig_modes)
        except Exception as exc:
            failed.append(exc)
        try:
            self._cdi.remove(record.uid)
        except Exception as exc:  # e.g. a folder where the spec should be
            logger.error("removing the CDI spec of claim %s failed: %s", record, exc)
            failed.append(exc)
        if failed:
            raise failed[0]
        return changed

    def release_devices(
        self,
        record: ClaimRecord,
        checkpoint: CheckpointData,
        *,
        found_mig_modes: Mapping[str, bool] | None = None,
    ) -> set[str]:
        """Gives back ``record``'s devices, last first, and puts each card's MIG mode back as it
        was found (``found_mig_modes``, else as the kept record says); returns the cards whose
        mode changed. Every device is tried; the first failure is raised at the end."""
        work = ClaimWork(record=record, checkpoint=checkpoint)
        if found_mig_modes is None:  # a rollback that could not finish recorded them
            found_mig_modes = recorded_mig_modes(record)
        failed: list[Exception] = []
        for device in reversed(record.devices):
            try:
                self._kinds.of(device).release(device, work)
            except Exception as exc:  # one stuck device must not keep the others
                logger.error("releasing device %s of claim %s failed: %s", device.device, record, exc)
                failed.append(exc)
        for card, enabled in sorted((found_mig_modes or {}).items()):
            try:
                if self._preparer.mig_enabled(card) == enabled or work.others_on(card):
                    continue
                if not enabled and self._preparer.mig_devices(card):
                    # A device of this claim is still there (its release failed): the mode
                    # follows once it is gone; the failure below keeps the record for that.
                    continue
                self._preparer.set_mig_mode(card, enabled=enabled)
                work.changed_cards.add(card)
            except Exception as exc:
                logger.error("putting the MIG mode of %s back failed: %s", card, exc)
                failed.append(exc)
        if failed:
            raise failed[0]
        return work.changed_cards


def recorded_mig_modes(record: ClaimRecord) -> dict[str, bool]:
    """The MIG modes a kept record says its cards were found in (none when it says nothing or
    something this release cannot read)."""
    found = (record.model_extra or {}).get(FOUND_MIG_MODES)
    if not isinstance(found, dict):
        return {}
    return {str(card): enabled for card, enabled in found.items() if isinstance(enabled, bool)}


def remember_found_mig_modes(record: ClaimRecord, modes: Mapping[str, bool]) -> None:
    """Keeps on ``record`` the MIG modes an attempt found its cards in, for whoever finishes its
    release (:meth:`ClaimRelease.release_devices`). An extra field of the record: readers that do
    not know it keep it, and records without it load as before."""
    setattr(record, FOUND_MIG_MODES, dict(sorted(modes.items())))
