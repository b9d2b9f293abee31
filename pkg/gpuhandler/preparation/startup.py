"""Start-up reconciliation: make the node match its checkpoint before the kubelet calls again.

Run once, under the node lock, before the plugin registers with the kubelet:

1. **Another boot** — the checkpoint's ``bootID`` is not this boot's: MIG instances and files under
   /run did not survive, so every entry describes state that is gone. Entries are dropped (their
   leftovers released, in case hardware kept something) and the kubelet prepares again what
   still runs.
2. **Prepares that died half-way** — ``PrepareStarted`` entries are rolled back and dropped. The
   kubelet's retry starts them afresh.
3. **Claims that no longer exist** — a completed entry whose ResourceClaim is gone (or was
   recreated with another UID) is unprepared: the kubelet forgets to unprepare claims deleted
   while the plugin was down (NVIDIA's #1278).
4. **What nobody owns** — claim CDI specs that no entry owns are removed, and each device kind
   makes what it leaves on the node match the remaining entries
   (:meth:`~.kinds.DeviceKind.reconcile_node`): MIG devices no entry owns destroyed, shared cards'
   time slices and MPS daemons as the entries say, VM files no entry owns removed.

Dropping an entry runs Prepare's undos over it (:meth:`~pkg.framework.steptaker.Pipeline.undo`),
the path a failed Prepare rolls back through: its CDI spec removed, its devices released by their
kinds in the one release order (:mod:`.release`), and only then the entry forgotten.

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

from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.framework.steptaker import Pipeline
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, CheckpointStore, ClaimRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds import ClaimWork, Kinds
from pkg.gpuhandler.preparation.services import ClaimReader

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
    orphan_cdi_specs: list[str] = field(default_factory=list)  # claim UIDs
    node: dict[str, list[str]] = field(default_factory=dict)  # what the kinds did: what -> cards
    changed_cards: set[str] = field(default_factory=set)
    failures: list[StartupFailure] = field(default_factory=list)  # what a later round retries
    checkpoint: CheckpointData | None = None  # the record as start-up left it (the VFIO holds follow it)

    @property
    def complete(self) -> bool:
        """Whether every step finished (else a later round runs start-up again)."""
        return not self.failures

    def failed(
        self, step: str, exc: BaseException | str, *, card: str | None = None, claim_uid: str | None = None
    ) -> None:
        logger.error(
            "start-up step %s failed, left for a later round: %s",
            step,
            exc,
            extra={"pci_address": card, "claim_uid": claim_uid},
        )
        metrics.startup_failures.labels(step=step).inc()
        self.failures.append(StartupFailure(step=step, error=str(exc), card=card, claim_uid=claim_uid))


class RecordRelease:
    """Releases a recorded claim through Prepare's undos, as a rolled-back Prepare does; the
    record is forgotten (durably) only when every release succeeded, else it is kept, started."""

    def __init__(self, prepare: Pipeline[ClaimAttempt]) -> None:
        self._prepare = prepare

    def __call__(self, record: ClaimRecord, checkpoint: CheckpointData) -> set[str]:
        """Returns the cards whose mode changed; raises what the first failing undo raised."""
        attempt = ClaimAttempt(
            ClaimRef(namespace=record.namespace, name=record.name, uid=record.uid),
            checkpoint=checkpoint,
            record=record,
        )
        attempt.work = ClaimWork(record=record, checkpoint=checkpoint, changed_cards=attempt.changed_cards)
        fields = {"claim": f"{record.namespace}/{record.name}", "claim_uid": record.uid}
        result = self._prepare.undo(attempt, log_fields=fields)
        if result.undo_failure is not None:
            raise result.undo_failure.error
        return attempt.changed_cards


def reconcile_at_startup(
    *,
    store: CheckpointStore,
    claims: ClaimReader,
    release: Callable[[ClaimRecord, CheckpointData], set[str]],
    kinds: Kinds,
    cdi: CdiSpecs,
    cards: Callable[[], Sequence[str]],
) -> StartupReport:
    """Runs the four passes (call with the node lock held); raises ``CheckpointError`` only.

    Every other failure — a card the backend cannot read, a full disk, a foreign file where ours
    was expected, a record of a newer release — is caught where it happens: the step does what it
    safely can, the rest is reported in :attr:`StartupReport.failures` (and counted in
    ``gpu_handler_startup_failures_total{step}``) for a later round. An entry whose release
    failed is kept, started: it still owns its devices, so no orphan sweep takes them.
    """
    report = StartupReport()
    report.checkpoint = checkpoint = store.load()

    def drop(uid: str, step: str) -> bool:
        record = checkpoint.claims[uid]
        try:
            report.changed_cards |= release(record, checkpoint)
        except Exception as exc:  # kept: it still owns what could not be released
            if uid not in checkpoint.claims:  # all released; only saving that failed: retried below
                return True
            record.state = PreparePhase.PREPARE_STARTED
            report.failed(step, exc, card=_first_card(record), claim_uid=uid)
            return False
        checkpoint.claims.pop(uid, None)
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
                # Kept, started: a later round (or the kubelet's retry) rolls it back like a prepare
                # that did not finish. The boot ID moves on, so claims prepared in this boot are
                # never taken for another boot's.
                tried.add(uid)
        checkpoint.boot_id = store.boot_id
    for uid, record in list(checkpoint.claims.items()):
        if uid in tried:
            continue
        if record.state is PreparePhase.PREPARE_STARTED:
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
    try:
        report.orphan_cdi_specs = cdi.remove_all_but(list(checkpoint.claims))
    except Exception as exc:  # e.g. a folder where a spec file should be
        report.failed("orphan-cdi-specs", exc)
    for uid in report.orphan_cdi_specs:
        logger.info("removed a CDI spec no claim owns", extra={"claim_uid": uid})
    _reconcile_kinds(kinds, checkpoint, known_cards, report)
    return report


def _reconcile_kinds(
    kinds: Kinds, checkpoint: CheckpointData, cards: Sequence[str], report: StartupReport
) -> None:
    """Each kind makes what it leaves on the node match the remaining records."""
    for kind in kinds:
        step = kind.node_step
        try:
            found = kind.reconcile_node(checkpoint, cards)
        except Exception as exc:
            report.failed(step, exc)
            continue
        for what, items in found.done.items():
            report.node.setdefault(what, []).extend(items)
        report.changed_cards |= found.changed_cards
        for card, error in found.failed:
            report.failed(step, error, card=card)


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
