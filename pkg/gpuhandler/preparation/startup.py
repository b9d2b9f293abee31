"""Start-up reconciliation: make the node match its checkpoint before the kubelet calls again.

Run once, under the node lock, before the plugin registers with the kubelet:

1. **Another boot** — the checkpoint's ``bootID`` is not this boot's: MIG instances and files under
   /run did not survive, so every entry describes state that is gone. Entries are dropped (their
   leftovers released, in case hardware kept something) and the kubelet prepares again what
   still runs.
2. **Prepares that died half-way** — ``PrepareStarted`` entries are rolled back: their MIG devices
   (found by placement) destroyed, their CDI specs removed, the entries dropped. The kubelet's
   retry starts them afresh.
3. **Claims that no longer exist** — a completed entry whose ResourceClaim is gone (or was
   recreated with another UID) is unprepared: the kubelet forgets to unprepare claims deleted
   while the plugin was down (NVIDIA's #1278).
4. **What nobody owns** — MIG devices on this node's cards that no entry owns, and claim CDI specs
   that no entry owns, are removed.
5. **Shared cards** — as the remaining entries say (:meth:`~sharing.CardSharing.reconcile`): time
   slices set, MPS daemons running for cards with MPS shares, every other MPS daemon stopped and
   its card given back.

Dropping an entry gives its VFIO functions back to their original drivers (the record names them
from before the first bind) and removes its VM metadata files; VM metadata folders no entry owns
are removed with the orphans. Dropping an entry releases what its shares needed too (the time
slice, the MPS daemon), unless a remaining entry's share needs it.

An unreadable checkpoint stops here and is reported: nothing is removed when it is unknown who
owns what (:mod:`checkpoint`). Every action is logged and counted in the returned report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pkg.backends.backend import BackendError
from pkg.backends.preparation import CardPreparer
from pkg.framework.client import ApiError, NotFoundError
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimState
from pkg.gpuhandler.preparation.release import release_devices
from pkg.gpuhandler.preparation.services import CheckpointStore, ClaimReader
from pkg.gpuhandler.preparation.sharing import CardSharing, SharingReport
from pkg.gpuhandler.preparation.vfio_steps import release_vfio
from pkg.gpuhandler.preparation.vm_metadata import VmFiles
from pkg.hardware.pci_binding import PciDriverBinding

logger = logging.getLogger(__name__)


@dataclass
class StartupReport:
    stale_boot: list[str] = field(default_factory=list)  # claim UIDs dropped for another boot
    rolled_back: list[str] = field(default_factory=list)  # PrepareStarted entries
    unprepared: list[str] = field(default_factory=list)  # claims that no longer exist
    orphan_mig_devices: list[str] = field(default_factory=list)  # "<card>@<start>"
    orphan_cdi_specs: list[str] = field(default_factory=list)  # claim UIDs
    sharing: SharingReport = field(default_factory=SharingReport)
    changed_cards: set[str] = field(default_factory=set)


def reconcile_at_startup(
    *,
    store: CheckpointStore,
    claims: ClaimReader,
    preparer: CardPreparer,
    sharing: CardSharing,
    cdi: CdiSpecs,
    cards: Callable[[], Sequence[str]],
    binding: PciDriverBinding | None = None,
    vm_files: VmFiles | None = None,
) -> StartupReport:
    """Runs the five passes (call with the node lock held); raises ``CheckpointError``."""
    report = StartupReport()
    checkpoint = store.load()
    dropper = _Dropper(
        checkpoint=checkpoint,
        preparer=preparer,
        sharing=sharing,
        cdi=cdi,
        report=report,
        binding=binding,
        vm_files=vm_files,
    )
    if checkpoint.boot_id != store.boot_id:
        for uid, record in list(checkpoint.claims.items()):
            dropper.drop(uid)
            report.stale_boot.append(uid)
            logger.info("dropped an entry of an earlier boot", extra={"claim": str(record), "claim_uid": uid})
        checkpoint.boot_id = store.boot_id
    for uid, record in list(checkpoint.claims.items()):
        if record.state is ClaimState.PREPARE_STARTED:
            dropper.drop(uid)
            report.rolled_back.append(uid)
            logger.info("rolled back a prepare that did not finish", extra={"claim": str(record)})
        elif not _exists(claims, record.namespace, record.name, uid):
            dropper.drop(uid)
            report.unprepared.append(uid)
            logger.info("unprepared a claim that no longer exists", extra={"claim": str(record)})
    store.save(checkpoint)
    known_cards = cards()
    _remove_orphans(checkpoint, preparer, cdi, known_cards, report)
    if vm_files is not None:
        for uid in vm_files.remove_all_but(list(checkpoint.claims)):
            logger.info("removed VM metadata no claim owns", extra={"claim_uid": uid})
    report.sharing = sharing.reconcile(checkpoint, known_cards)
    return report


class _Dropper:
    """Drops entries: their devices, their shares' card settings and their CDI specs released."""

    def __init__(
        self,
        *,
        checkpoint: CheckpointData,
        preparer: CardPreparer,
        sharing: CardSharing,
        cdi: CdiSpecs,
        report: StartupReport,
        binding: PciDriverBinding | None,
        vm_files: VmFiles | None,
    ) -> None:
        self._binding = binding
        self._vm_files = vm_files
        self._checkpoint = checkpoint
        self._preparer = preparer
        self._sharing = sharing
        self._cdi = cdi
        self._report = report

    def drop(self, uid: str) -> None:
        record = self._checkpoint.claims.pop(uid)
        self._sharing.release(record, remaining=self._checkpoint.claims.values())
        if self._binding is not None:
            self._report.changed_cards.update(release_vfio(record, self._binding))
        self._report.changed_cards.update(release_devices(record, self._preparer))
        self._cdi.remove(uid)
        if self._vm_files is not None:
            self._vm_files.remove(uid)


def _exists(claims: ClaimReader, namespace: str, name: str, uid: str) -> bool:
    """Whether the claim still exists; when the API server cannot say, it is kept (unknown is not gone)."""
    try:
        meta = claims.get(namespace, name).metadata
        return meta is not None and meta.uid == uid
    except NotFoundError:
        return False
    except ApiError as exc:
        logger.warning("cannot check claim %s/%s, keeping it: %s", namespace, name, exc)
        return True


def _remove_orphans(
    checkpoint: CheckpointData,
    preparer: CardPreparer,
    cdi: CdiSpecs,
    cards: Sequence[str],
    report: StartupReport,
) -> None:
    owned = {
        (d.card, d.mig.placement_start)
        for c in checkpoint.claims.values()
        for d in c.devices
        if d.mig is not None
    }
    for card in cards:
        try:
            devices = preparer.mig_devices(card)
        except BackendError as exc:  # a card the vendor library cannot see now (e.g. on vfio-pci)
            logger.warning("cannot list MIG devices of %s: %s", card, exc)
            continue
        for device in devices:
            if (card, device.start) not in owned:
                preparer.destroy_mig_device(card, start=device.start)
                report.orphan_mig_devices.append(f"{card}@{device.start}")
                report.changed_cards.add(card)
                logger.info(
                    "removed a MIG device no claim owns", extra={"pci_address": card, "start": device.start}
                )
    report.orphan_cdi_specs = cdi.remove_all_but(list(checkpoint.claims))
    for uid in report.orphan_cdi_specs:
        logger.info("removed a CDI spec no claim owns", extra={"claim_uid": uid})
