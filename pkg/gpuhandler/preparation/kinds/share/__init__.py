"""A TimeSlicing or MPS share of a whole card: the card's shared setting, and the share's limits.

A share takes the card whole (out of MIG mode, :func:`~..whole_card.take_whole_card`); what the
card needs for its shares — the time slice, the MPS control daemon — is set up by the first share
and undone by the last (:class:`~.card_sharing.CardSharing`), so releasing a share undoes it only
when no other claim's share of that strategy is left on the card.

A share is planned with what the scheduler consumed for it (``consumedCapacity``), sized by the
rule ``kubectl gpu who`` shows it by (:mod:`pkg.dra.model.share_size`): ``sharePercent``, and
``memory`` when the claim asked for memory; MPS enforces both, so a share's memory limit is the
memory it consumed or, when it asked for none, its ``sharePercent`` of the card's memory. Shares
fit together on a card when they are of one strategy with distinct share IDs and, for
TimeSlicing, the same time slice. At start-up the recorded shares' card settings are made again
and MPS daemons no share owns are stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from api.gpu.v1alpha1 import SharingStrategy, TimeSlicingInterval
from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.dra.model.share_size import ShareSizeError, share_size
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, DeviceRecord
from pkg.gpuhandler.preparation.kinds import (
    ClaimWork,
    Conflict,
    DeviceKind,
    NodeReport,
    Offer,
    OfferMatch,
    PlanContext,
    PlanError,
    record_of,
)
from pkg.gpuhandler.preparation.kinds.share.card_sharing import FIELD, CardSharing, MpsWatchdog, SharingRecord
from pkg.gpuhandler.preparation.kinds.whole_card import take_whole_card

SHARE_PERCENT: Final = "sharePercent"
MEMORY: Final = "memory"


class ShareKind(DeviceKind):
    name = "share"
    offers = OfferMatch("Physical", shared=True)
    record_field = FIELD
    record_model = SharingRecord
    node_step = "sharing"
    reader_version = 2  # an older reader would not stop the card's MPS daemon or restore its time slice

    def __init__(self, *, preparer: CardPreparer, sharing: CardSharing, watchdog: MpsWatchdog) -> None:
        self._preparer = preparer
        self._sharing = sharing
        self._watchdog = watchdog

    def plan(self, offer: Offer, context: PlanContext) -> SharingRecord:
        settings = offer.config.sharing if offer.config is not None else None
        consumed = offer.result.consumed_capacity or {}
        mps = settings.mps if settings is not None else None

        def consumed_quantity(name: str) -> int | None:
            return offer.quantity(consumed[name], f"consumed {name}") if name in consumed else None

        def card_memory() -> int:
            capacity = (offer.device.capacity or {}).get(MEMORY)
            if capacity is None or capacity.value is None:
                raise PlanError(f"{offer.where} is an MPS share but its offer has no {MEMORY} capacity")
            return offer.quantity(capacity.value, f"{MEMORY} capacity")

        try:
            size = share_size(
                offer.sharing,
                consumed_percent=consumed_quantity(SHARE_PERCENT),
                consumed_memory=consumed_quantity(MEMORY),
                default_percent=mps.default_active_thread_percentage if mps is not None else None,
                card_memory=card_memory,
            )
        except ShareSizeError as err:
            raise PlanError(f"{offer.where} has {err}") from None
        interval = TimeSlicingInterval.DEFAULT
        if settings is not None and settings.time_slicing is not None:
            interval = settings.time_slicing.interval
        return SharingRecord(
            strategy=offer.sharing.value,
            share_percent=size.percent,
            memory_mib=size.memory_mib,
            interval=interval.value,
        )

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        share = record_of(device, ShareKind, SharingRecord)
        other = record_of(held, ShareKind, SharingRecord)
        if share.strategy != other.strategy:
            return Conflict(
                "DoubleAllocation", f"is a {share.strategy} share, but the card is shared by {other.strategy}"
            )
        if device.share_id is not None and device.share_id == held.share_id:
            return Conflict("DoubleAllocation", f"has share ID {device.share_id}, which is already prepared")
        if share.strategy == SharingStrategy.TIME_SLICING and share.interval != other.interval:
            return Conflict(
                "IntervalConflict",
                f"asks for time slice {share.interval}, but the card is time-sliced {other.interval} "
                "for the shares already on it",
            )
        return None

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        take_whole_card(self._preparer, device, work)
        return self._sharing.set_up(device)

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        self._sharing.release(device, others=work.others_on(device.card))

    def follow(self, checkpoint: CheckpointData) -> None:
        """An MPS daemon that died while shares use its card is started again (with backoff)."""
        self._watchdog.check(checkpoint)

    def reconcile_node(self, checkpoint: CheckpointData, cards: Sequence[str]) -> NodeReport:
        found = self._sharing.reconcile(checkpoint, cards)
        report = NodeReport()
        for line in found.failed:  # CardSharing reports "<card>: <error>"
            card, _, error = line.partition(": ")
            report.failed.append((card, error))
        for card in found.mps_started:
            report.add("MPS daemons started", card)
        for card in found.mps_orphans_stopped:
            report.add("orphan MPS daemons stopped", card)
        return report
