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

Dropping an entry releases the claim in the one release order (:mod:`.release`), as Unprepare
does: its shares' card settings unless a remaining entry's share needs them, its VFIO functions
back to their original drivers (the record names them from before the first bind) and its VM
files removed, its MIG devices destroyed, its CDI spec removed; only then is the entry dropped.
VM metadata folders no entry owns are removed with the orphans.

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
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, CheckpointStore, PrepareState
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.services import ClaimReader
from pkg.gpuhandler.preparation.sharing import CardSharing, SharingReport
from pkg.gpuhandler.preparation.vm_metadata import VmFiles

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
    release: ClaimRelease,
    preparer: CardPreparer,
    sharing: CardSharing,
    cdi: CdiSpecs,
    vm_files: VmFiles,
    cards: Callable[[], Sequence[str]],
) -> StartupReport:
    """Runs the five passes (call with the node lock held); raises ``CheckpointError``."""
    report = StartupReport()
    checkpoint = store.load()

    def drop(uid: str) -> None:
        report.changed_cards |= release.release(checkpoint.claims[uid], checkpoint)
        del checkpoint.claims[uid]

    if checkpoint.boot_id != store.boot_id:
        for uid, record in list(checkpoint.claims.items()):
            drop(uid)
            report.stale_boot.append(uid)
            logger.info("dropped an entry of an earlier boot", extra={"claim": str(record), "claim_uid": uid})
        checkpoint.boot_id = store.boot_id
    for uid, record in list(checkpoint.claims.items()):
        if record.state is PrepareState.PREPARE_STARTED:
            drop(uid)
            report.rolled_back.append(uid)
            logger.info("rolled back a prepare that did not finish", extra={"claim": str(record)})
        elif not _exists(claims, record.namespace, record.name, uid):
            drop(uid)
            report.unprepared.append(uid)
            logger.info("unprepared a claim that no longer exists", extra={"claim": str(record)})
    store.save(checkpoint)
    known_cards = cards()
    _remove_orphans(checkpoint, preparer, cdi, known_cards, report)
    for uid in vm_files.remove_all_but(list(checkpoint.claims)):
        logger.info("removed VM metadata no claim owns", extra={"claim_uid": uid})
    report.sharing = sharing.reconcile(checkpoint, known_cards)
    return report


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
