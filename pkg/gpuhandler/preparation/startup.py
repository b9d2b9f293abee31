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

Start-up never takes the process down: every other failure (a card the backend cannot read, a
full disk, a foreign file or folder in our folders, an entry of a kind this release does not
know) is caught in its step, reported in :attr:`StartupReport.failures` and counted; the caller
(:class:`~.runnable.PluginRunnable`) serves anyway and runs start-up again later, with backoff. An
entry whose release failed is kept, so the orphan sweeps never take a device a record owns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pkg.backends.preparation import CardPreparer
from pkg.framework.client import NotFoundError
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, CheckpointStore, ClaimRecord, PrepareState
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.services import ClaimReader
from pkg.gpuhandler.preparation.sharing import CardSharing, SharingReport
from pkg.gpuhandler.preparation.vm_metadata import VmFiles

logger = logging.getLogger(__name__)


@dataclass
class StartupFailure:
    """A start-up step that could not finish: ``step`` names it, ``card`` the card involved (if any)."""

    step: str
    error: str
    card: str | None = None
    claim_uid: str | None = None


@dataclass
class StartupReport:
    stale_boot: list[str] = field(default_factory=list)  # claim UIDs dropped for another boot
    rolled_back: list[str] = field(default_factory=list)  # PrepareStarted entries
    unprepared: list[str] = field(default_factory=list)  # claims that no longer exist
    orphan_mig_devices: list[str] = field(default_factory=list)  # "<card>@<start>"
    orphan_cdi_specs: list[str] = field(default_factory=list)  # claim UIDs
    sharing: SharingReport = field(default_factory=SharingReport)
    changed_cards: set[str] = field(default_factory=set)
    failures: list[StartupFailure] = field(default_factory=list)  # what a later round retries
    checkpoint: CheckpointData | None = None  # the record as start-up left it (the VFIO holds follow it)

    @property
    def complete(self) -> bool:
        """Whether every step finished (else a later round runs start-up again)."""
        return not self.failures and not self.sharing.failed

    def failed(
        self, step: str, exc: BaseException, *, card: str | None = None, claim_uid: str | None = None
    ) -> None:
        logger.error(
            "start-up step %s failed, left for a later round: %s",
            step,
            exc,
            extra={"pci_address": card, "claim_uid": claim_uid},
        )
        metrics.startup_failures.labels(step=step).inc()
        self.failures.append(StartupFailure(step=step, error=str(exc), card=card, claim_uid=claim_uid))


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
    """Runs the five passes (call with the node lock held); raises ``CheckpointError`` only.

    Every other failure — a card the backend cannot read, a full disk, a foreign file where ours
    was expected, a record of a newer release — is caught where it happens: the step does what it
    safely can, the rest is reported in :attr:`StartupReport.failures` (and counted in
    ``gpu_handler_startup_failures_total{step}``) for a later round. An entry whose release
    failed is kept: it still owns its devices, so no orphan sweep takes them.
    """
    report = StartupReport()
    report.checkpoint = checkpoint = store.load()

    def drop(uid: str, step: str) -> bool:
        record = checkpoint.claims[uid]
        try:
            report.changed_cards |= release.release(record, checkpoint)
        except Exception as exc:  # kept: it still owns what could not be released
            report.failed(step, exc, card=_first_card(record), claim_uid=uid)
            return False
        del checkpoint.claims[uid]
        return True

    tried: set[str] = set()  # entries whose release failed this round
    if checkpoint.boot_id != store.boot_id:
        for uid, record in list(checkpoint.claims.items()):
            if drop(uid, "stale-boot"):
                report.stale_boot.append(uid)
                logger.info(
                    "dropped an entry of an earlier boot", extra={"claim": str(record), "claim_uid": uid}
                )
            else:
                # Kept, but prepared for a boot that is gone: a later round (or the kubelet's
                # retry) rolls it back like a prepare that did not finish. The boot ID moves on,
                # so claims prepared in this boot are never taken for another boot's.
                record.state = PrepareState.PREPARE_STARTED
                tried.add(uid)
        checkpoint.boot_id = store.boot_id
    for uid, record in list(checkpoint.claims.items()):
        if uid in tried:
            continue
        if record.state is PrepareState.PREPARE_STARTED:
            if drop(uid, "roll-back"):
                report.rolled_back.append(uid)
                logger.info("rolled back a prepare that did not finish", extra={"claim": str(record)})
        elif not _exists(claims, record.namespace, record.name, uid) and drop(uid, "unprepare-gone"):
            report.unprepared.append(uid)
            logger.info("unprepared a claim that no longer exists", extra={"claim": str(record)})
    try:
        store.save(checkpoint)
    except Exception as exc:  # a full disk: what was released is released; the next round saves
        report.failed("save-checkpoint", exc)
    try:
        known_cards = list(cards())
    except Exception as exc:
        report.failed("list-cards", exc)
        known_cards = []
    _remove_orphans(checkpoint, preparer, cdi, known_cards, report)
    try:
        for uid in vm_files.remove_all_but(list(checkpoint.claims)):
            logger.info("removed VM metadata no claim owns", extra={"claim_uid": uid})
    except Exception as exc:  # e.g. a file where the VM folder should be
        report.failed("orphan-vm-files", exc)
    try:
        report.sharing = sharing.reconcile(checkpoint, known_cards)
    except Exception as exc:
        report.failed("sharing", exc)
    for failed in report.sharing.failed:
        metrics.startup_failures.labels(step="sharing").inc()
        logger.debug("sharing failure counted: %s", failed)
    return report


def _first_card(record: ClaimRecord) -> str | None:
    return record.devices[0].card if record.devices else None


def _exists(claims: ClaimReader, namespace: str, name: str, uid: str) -> bool:
    """Whether the claim still exists; when the API server cannot say, it is kept (unknown is not gone)."""
    try:
        meta = claims.get(namespace, name).metadata
        return meta is not None and meta.uid == uid
    except NotFoundError:
        return False
    except Exception as exc:  # ApiError, a transport error: unknown is not gone
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
        except Exception as exc:  # a card the vendor library cannot see now (e.g. on vfio-pci)
            logger.warning("cannot list MIG devices of %s: %s", card, exc)
            continue
        for device in devices:
            if (card, device.start) in owned:
                continue
            try:
                preparer.destroy_mig_device(card, start=device.start)
            except Exception as exc:
                report.failed("orphan-mig-devices", exc, card=card)
                continue
            report.orphan_mig_devices.append(f"{card}@{device.start}")
            report.changed_cards.add(card)
            logger.info(
                "removed a MIG device no claim owns", extra={"pci_address": card, "start": device.start}
            )
    try:
        report.orphan_cdi_specs = cdi.remove_all_but(list(checkpoint.claims))
    except Exception as exc:  # e.g. a folder where a spec file should be
        report.failed("orphan-cdi-specs", exc)
    for uid in report.orphan_cdi_specs:
        logger.info("removed a CDI spec no claim owns", extra={"claim_uid": uid})
