"""A shared card's settings follow the shares prepared on it, as the checkpoint records them.

TimeSlicing and MPS shares change the whole card, not just one claim's device, so the card's
setting is made by the first share and undone by the last (the share kind, :mod:`.kinds.share`,
asks for both):

* **TimeSlicing** — the card's time slice is the one its shares asked for (they all agree: the
  Prepare pipeline refuses a share asking for another); when no TimeSlicing share is left the
  card gets ``Default`` back.
* **MPS** — one control daemon per card, in ``<mps root>/<card address>/``, started with the first
  share and stopped after the last; each share's container gets the daemon's folders and its own
  limits (:class:`~pkg.backends.preparation.MpsLimits`).

The card's MPS folder is the durable trace that it was given to MPS: it is created before the
compute mode changes and removed after it is restored, so start-up finds, by folder, every card a
crash left half-way and puts it back (:meth:`CardSharing.reconcile`). A daemon that dies while
shares use the card is started again by :class:`MpsWatchdog`, with backoff.

Everything here runs under the node lock and is idempotent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pydantic import Field, field_validator

from api.gpu.v1alpha1 import SharingStrategy, TimeSlicingInterval
from pkg.backends.backend import BackendError
from pkg.backends.preparation import CardPreparer, ContainerEdits, MpsFolders, MpsLimits
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, KindRecord

logger = logging.getLogger(__name__)

FIELD = "sharing"


class SharingRecord(KindRecord):
    """A share of a whole card: its strategy and what the node set up and enforces for it. A
    strategy or time slice this release does not know is refused when the checkpoint is read: a
    newer release that adds one must raise the reader version, so here it means damage (an
    unknown strategy would otherwise be taken for MPS)."""

    strategy: str  # TimeSlicing | MPS
    share_percent: int = Field(alias="sharePercent")
    memory_mib: int = Field(alias="memoryMiB")
    interval: str = "Default"  # TimeSlicing: the card's time slice while it is shared

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        if value not in {s.value for s in SharingStrategy}:
            raise ValueError(f"sharing strategy {value!r} is unknown to this release")
        return value

    @field_validator("interval")
    @classmethod
    def _known_interval(cls, value: str) -> str:
        if value not in {i.value for i in TimeSlicingInterval}:
            raise ValueError(f"time-slice interval {value!r} is unknown to this release")
        return value


def share_of(device: DeviceRecord) -> SharingRecord | None:
    """``device``'s share record, or None for a device of another kind."""
    return device.kind_record(FIELD, SharingRecord)


def shares(checkpoint: CheckpointData) -> list[tuple[DeviceRecord, SharingRecord]]:
    """Every recorded share, of every claim, with its device."""
    found = []
    for claim in checkpoint.claims.values():
        for device in claim.devices:
            if (share := share_of(device)) is not None:
                found.append((device, share))
    return found


@dataclass
class SharingReport:
    """What start-up changed: MPS daemons started for recorded shares, and orphans stopped."""

    mps_started: list[str] = field(default_factory=list)  # card addresses
    mps_orphans_stopped: list[str] = field(default_factory=list)  # card addresses
    failed: list[str] = field(default_factory=list)  # "<card>: <error>"


class CardSharing:
    """Sets up and undoes the card-wide side of shares through the vendor's preparer."""

    def __init__(self, *, preparer: CardPreparer, mps_root: Path) -> None:
        self._preparer = preparer
        self._root = mps_root

    def folders(self, card: str) -> MpsFolders:
        return MpsFolders(self._root / card)

    def set_up(self, device: DeviceRecord) -> ContainerEdits:
        """Makes the card ready for the share ``device`` and returns what its container needs."""
        share = share_of(device)
        if share is None:
            raise ValueError(f"device {device.device} is not a share")
        if share.strategy == SharingStrategy.TIME_SLICING:
            self._preparer.set_time_slice(device.card, TimeSlicingInterval(share.interval))
            return self._preparer.card_edits(device.card)
        folders = self.folders(device.card)
        self._preparer.start_mps(device.card, folders)
        limits = MpsLimits(thread_percentage=share.share_percent, memory_limit_mib=share.memory_mib)
        return self._preparer.mps_edits(device.card, folders, limits)

    def release(self, device: DeviceRecord, others: Iterable[ClaimRecord]) -> None:
        """Undoes what the share ``device`` needed of its card, unless a share of ``others`` on the
        card (another claim's) still needs it."""
        share = share_of(device)
        if share is None:
            raise ValueError(f"device {device.device} is not a share")
        on_card = [d for claim in others for d in claim.devices if d.card == device.card]
        strategies = {other.strategy for d in on_card if (other := share_of(d)) is not None}
        if share.strategy in strategies:
            return
        if share.strategy == SharingStrategy.TIME_SLICING:
            self._preparer.set_time_slice(device.card, TimeSlicingInterval.DEFAULT)
        else:
            self._preparer.stop_mps(device.card, self.folders(device.card))

    def reconcile(self, checkpoint: CheckpointData, cards: Sequence[str]) -> SharingReport:
        """Start-up: the recorded shares' time slices set and MPS daemons running, and every MPS
        folder no recorded share owns stopped and removed. A card that fails is reported and left
        to the watchdog and the next start."""
        report = SharingReport()
        for card, interval in sorted(self._recorded_time_slices(checkpoint, report).items()):
            self._try(report, card, partial(self._preparer.set_time_slice, card, interval))
        wanted = mps_cards(checkpoint)
        for card in sorted(wanted):
            if self._try(report, card, partial(self._preparer.start_mps, card, self.folders(card))):
                report.mps_started.append(card)
        known = set(cards)
        for card in sorted(self._folder_cards() - wanted):
            if card not in known:
                logger.warning(
                    "an MPS folder names a card this node does not report", extra={"pci_address": card}
                )
            if self._try(report, card, partial(self._preparer.stop_mps, card, self.folders(card))):
                report.mps_orphans_stopped.append(card)
        return report

    @staticmethod
    def _recorded_time_slices(
        checkpoint: CheckpointData, report: SharingReport
    ) -> dict[str, TimeSlicingInterval]:
        """:func:`time_slices`, a share whose recorded time slice this release does not know
        reported instead of raised (its card is left as it is)."""
        slices: dict[str, TimeSlicingInterval] = {}
        for device, share in shares(checkpoint):
            if share.strategy != SharingStrategy.TIME_SLICING:
                continue
            try:
                slices[device.card] = TimeSlicingInterval(share.interval)
            except ValueError as exc:
                logger.error("a recorded time slice is unknown: %s", exc, extra={"pci_address": device.card})
                report.failed.append(f"{device.card}: {exc}")
        return slices

    def _folder_cards(self) -> set[str]:
        try:
            return {p.name for p in self._root.iterdir() if p.is_dir()}
        except (FileNotFoundError, NotADirectoryError):
            return set()

    @staticmethod
    def _try(report: SharingReport, card: str, action: Callable[[], bool | None]) -> bool:
        try:
            return bool(action())
        except Exception as exc:  # BackendError, OSError, anything: the next card still gets its turn
            logger.error("sharing reconciliation of a card failed: %s", exc, extra={"pci_address": card})
            report.failed.append(f"{card}: {exc}")
            return False


def time_slices(checkpoint: CheckpointData) -> dict[str, TimeSlicingInterval]:
    """The time slice each card's recorded TimeSlicing shares use."""
    return {
        d.card: TimeSlicingInterval(share.interval)
        for d, share in shares(checkpoint)
        if share.strategy == SharingStrategy.TIME_SLICING
    }


def mps_cards(checkpoint: CheckpointData) -> set[str]:
    """The cards with a recorded MPS share."""
    return {d.card for d, share in shares(checkpoint) if share.strategy == SharingStrategy.MPS}


class MpsWatchdog:
    """Starts the MPS daemon of a card with MPS shares again when it died.

    :meth:`check` is called periodically (under the node lock, with a fresh checkpoint). A card
    whose restart fails waits before the next attempt: ``initial_backoff`` doubling up to
    ``max_backoff``, reset once the daemon runs again.
    """

    def __init__(
        self,
        sharing: CardSharing,
        preparer: CardPreparer,
        *,
        initial_backoff: float = 5.0,
        max_backoff: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sharing = sharing
        self._preparer = preparer
        self._initial = initial_backoff
        self._max = max_backoff
        self._clock = clock
        self._waits: dict[str, tuple[float, float]] = {}  # card -> (next attempt, current backoff)

    def check(self, checkpoint: CheckpointData) -> list[str]:
        """Restarts dead daemons of cards with MPS shares; returns the cards restarted."""
        restarted = []
        wanted = mps_cards(checkpoint)
        for card in list(self._waits):
            if card not in wanted:
                del self._waits[card]
        for card in sorted(wanted):
            folders = self._sharing.folders(card)
            if self._preparer.mps_running(folders):
                self._waits.pop(card, None)
                continue
            not_before, backoff = self._waits.get(card, (0.0, self._initial / 2))
            if self._clock() < not_before:
                continue
            logger.warning(
                "the MPS control daemon of a shared card died; starting it again", extra={"pci_address": card}
            )
            try:
                self._preparer.start_mps(card, folders)
            except (BackendError, OSError) as exc:
                backoff = min(backoff * 2, self._max)
                self._waits[card] = (self._clock() + backoff, backoff)
                logger.error(
                    "restarting the MPS control daemon failed, next try in %.0fs: %s",
                    backoff,
                    exc,
                    extra={"pci_address": card},
                )
                continue
            self._waits.pop(card, None)
            metrics.mps_daemon_restarts.inc()
            restarted.append(card)
        return restarted
