"""The steps of Prepare, in pipeline order (DESIGN §9, spec §9.2).

1. ``load-checkpoint`` — the node's record, read fresh under the node lock.
2. ``recorded-answer`` — a claim already ``PrepareCompleted`` gets its recorded answer (Stop):
   the kubelet retries and restarts, and a second prepare must change nothing.
3. ``plan`` — the claim's allocation, read fresh from the API server, turned into the devices this
   node must prepare (:mod:`allocation`).
   ``plan-vfio`` — whether the Pod reserving the claim asks for VFIO passthrough and may have it,
   and which functions of the card's IOMMU group go to ``vfio-pci`` (:mod:`vfio`, :mod:`vfio_steps`).
4. ``refuse-double-allocation`` — a device (or the card under it) already prepared for another
   claim is refused: two allocators raced (DESIGN §5), and preparing it twice would hand one GPU
   to two workloads. Shares of one strategy stack on a card, each with its own share ID; a
   TimeSlicing share asking for another time slice than the card's shares use is refused
   (``IntervalConflict``): the time slice is card-wide and never silently changed under them.
5. ``record-started`` — ``PrepareStarted`` with the planned devices, durably, before any hardware
   changes: whatever the next steps leave behind after a crash is then owned and found again.
6. ``prepare-devices`` — the hardware: MIG mode (only on a free card), the MIG device at the
   offer's placement, or a whole card (out of MIG mode first if it was left there empty).
   ``bind-vfio`` — for VFIO, every function of the group bound to ``vfio-pci`` (:mod:`vfio_steps`).
7. ``configure-sharing`` — for shares, the card-wide side (:mod:`sharing`): its time slice, or its
   MPS daemon started, and the share's container edits with its MPS limits.
   ``write-vm-metadata`` — for VFIO, the device metadata file KubeVirt reads and the QEMU hook input.
8. ``write-cdi-spec`` — the claim's CDI spec.
9. ``record-completed`` — ``PrepareCompleted`` with the CDI device IDs: the answer.

A failing step rolls back the completed ones in reverse (the StepTaker); a crash between steps
is repaired by start-up reconciliation (:mod:`startup`) or the kubelet's retry, which finds the
``PrepareStarted`` record and continues (every step is idempotent).
"""

from __future__ import annotations

from datetime import UTC, datetime

from api.gpu.v1alpha1 import DeviceType, SharingStrategy
from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import PreparedDevice, PrepareOutcome
from pkg.framework.steptaker import Continue, StepOutcome, Stop
from pkg.gpuhandler.preparation.allocation import ClaimPlan, PlanError, PlannedDevice, plan_claim
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import (
    ClaimRecord,
    ClaimState,
    DeviceRecord,
    MigRecord,
    SharingRecord,
    VfioFunctionRecord,
    VfioRecord,
)
from pkg.gpuhandler.preparation.context import StepContext, StepOrderError
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.release import release_devices
from pkg.gpuhandler.preparation.services import CheckpointStore, ClaimReader, OfferIndex
from pkg.gpuhandler.preparation.sharing import CardSharing
from pkg.gpuhandler.preparation.vfio_steps import release_vfio
from pkg.hardware.pci_binding import PciDriverBinding


class LoadCheckpoint:
    name = "load-checkpoint"

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def take(self, ctx: StepContext) -> StepOutcome:
        ctx.checkpoint = self._store.load()
        return Continue()


class RecordedAnswer:
    name = "recorded-answer"

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims.get(ctx.claim.uid)
        if record is None or record.state is not ClaimState.PREPARE_COMPLETED:
            return Continue()
        ctx.answer = answer_of(record)
        return Stop("already prepared: the recorded answer")


class Plan:
    name = "plan"

    def __init__(self, *, claims: ClaimReader, offers: OfferIndex, pool: str) -> None:
        self._claims = claims
        self._offers = offers
        self._pool = pool

    def take(self, ctx: StepContext) -> StepOutcome:
        claim = ctx.claim
        try:
            resource = self._claims.get(claim.namespace, claim.name)
        except NotFoundError:
            raise PrepareFailedError(
                "ClaimNotFound", f"claim {claim.namespace}/{claim.name} does not exist"
            ) from None
        uid = resource.metadata.uid if resource.metadata else None
        if uid != claim.uid:
            raise PrepareFailedError(
                "ClaimNotFound", f"claim {claim.namespace}/{claim.name} is now {uid}, not {claim.uid}"
            )
        ctx.resource = resource
        try:
            ctx.plan = plan_claim(resource, pool=self._pool, offers=self._offers.device)
        except PlanError as exc:
            raise PrepareFailedError("InvalidAllocation", str(exc)) from None
        return Continue()


class RefuseDoubleAllocation:
    name = "refuse-double-allocation"

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        plan = ctx.require(ctx.plan, "the plan", self.name)
        others = [c for c in checkpoint.claims.values() if c.uid != plan.uid]
        for device in plan.devices:
            for other in others:
                for held in other.devices:
                    if held.card != device.card:
                        continue
                    conflict = _conflict(device, held)
                    if conflict is not None:
                        reason, problem = conflict
                        raise PrepareFailedError(
                            reason,
                            f"claim {plan}: device {device.device} on card {device.card} {problem} "
                            f"(device {held.device} of claim {other})",
                        )
        return Continue()


def _conflict(device: PlannedDevice, held: DeviceRecord) -> tuple[str, str] | None:
    """Why two devices cannot both be prepared on one card (a reason and a phrase), or None.

    MIG devices fit together when their placements do not overlap; shares fit together when they
    are shares of one strategy with distinct share IDs and, for TimeSlicing, the same time slice;
    anything else next to anything on the card is one GPU handed out twice.
    """
    if device.mig is not None and held.mig is not None:
        mine = set(range(device.mig.start, device.mig.start + device.mig.size))
        theirs = set(range(held.mig.placement_start, held.mig.placement_start + held.mig.placement_size))
        return ("DoubleAllocation", "overlaps a prepared MIG device") if mine & theirs else None
    share, other = device.share, held.sharing
    if share is None or other is None:
        return "DoubleAllocation", "is already prepared"
    if share.strategy.value != other.strategy:
        return (
            "DoubleAllocation",
            f"is a {share.strategy.value} share, but the card is shared by {other.strategy}",
        )
    if device.share_id is not None and device.share_id == held.share_id:
        return "DoubleAllocation", f"has share ID {device.share_id}, which is already prepared"
    if share.strategy is SharingStrategy.TIME_SLICING and share.interval.value != other.interval:
        return (
            "IntervalConflict",
            f"asks for time slice {share.interval.value}, but the card is time-sliced {other.interval} "
            "for the shares already on it",
        )
    return None


class RecordStarted:
    name = "record-started"

    def __init__(self, store: CheckpointStore, binding: PciDriverBinding | None = None) -> None:
        self._store = store
        self._binding = binding

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        plan = ctx.require(ctx.plan, "the plan", self.name)
        checkpoint.claims[plan.uid] = ClaimRecord(
            uid=plan.uid,
            namespace=plan.namespace,
            name=plan.name,
            state=ClaimState.PREPARE_STARTED,
            devices=[_record(device) for device in plan.devices],
            updated=datetime.now(UTC),
        )
        self._store.save(checkpoint)
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims.get(ctx.claim.uid)
        if record is not None and self._binding is not None:
            # The record is the only memory of the functions' original drivers: it goes only once
            # they are back (a failure here keeps it, for the retry or start-up to finish).
            ctx.changed_cards.update(release_vfio(record, self._binding))
        if checkpoint.claims.pop(ctx.claim.uid, None) is not None:
            self._store.save(checkpoint)


def _record(device: PlannedDevice) -> DeviceRecord:
    mig = None
    if device.mig is not None:
        mig = MigRecord(
            profile_id=device.mig.profile_id, placement_start=device.mig.start, placement_size=device.mig.size
        )
    vfio = None
    if device.vfio is not None:
        vfio = VfioRecord(
            iommu_group=device.vfio.iommu_group,
            functions=[VfioFunctionRecord(address=f.address, driver=f.driver) for f in device.vfio.functions],
        )
    sharing = None
    if device.share is not None:
        sharing = SharingRecord(
            strategy=device.share.strategy.value,
            share_percent=device.share.share_percent,
            memory_mib=device.share.memory_mib,
            interval=device.share.interval.value,
        )
    return DeviceRecord(
        pool=device.pool,
        device=device.device,
        requests=[device.request],
        card=device.card,
        device_type=device.device_type.value,
        share_id=device.share_id,
        mig=mig,
        sharing=sharing,
        vfio=vfio,
    )


class PrepareDevices:
    name = "prepare-devices"

    def __init__(self, *, preparer: CardPreparer, store: CheckpointStore) -> None:
        self._preparer = preparer
        self._store = store

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        plan = ctx.require(ctx.plan, "the plan", self.name)
        record = checkpoint.claims[plan.uid]
        try:
            for planned, stored in zip(plan.devices, record.devices, strict=True):
                if planned.device_type is DeviceType.MIG:
                    ctx.edits[planned.device] = self._mig(ctx, plan, planned, stored)
                elif planned.share is None:
                    ctx.edits[planned.device] = self._whole_card(ctx, plan, planned)
                else:
                    self._whole_card(ctx, plan, planned)  # configure-sharing makes its edits
        except Exception:
            self.rollback(ctx)  # a failing step cleans up its own partial work
            raise
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims.get(ctx.claim.uid)
        if record is not None:
            release_devices(record, self._preparer)
        for card in ctx.mig_enabled_here:  # put a card we switched back, unless somebody else uses it
            others = [c for c in checkpoint.claims_on_card(card) if c.uid != ctx.claim.uid]
            if not others and not self._preparer.mig_devices(card):
                self._preparer.set_mig_mode(card, enabled=False)

    def _mig(
        self, ctx: StepContext, plan: ClaimPlan, planned: PlannedDevice, stored: DeviceRecord
    ) -> ContainerEdits:
        assert planned.mig is not None
        card = planned.card
        if not self._preparer.mig_enabled(card):
            self._require_free(plan, card, ctx)
            self._preparer.set_mig_mode(card, enabled=True)
            ctx.mig_enabled_here.add(card)
            ctx.changed_cards.add(card)
        made = self._preparer.create_mig_device(
            card, profile_id=planned.mig.profile_id, start=planned.mig.start, size=planned.mig.size
        )
        assert stored.mig is not None
        # Recorded with the claim's completion; until then the placement in the PrepareStarted
        # record is what makes the device this claim's (release and start-up find it by placement).
        stored.mig.gpu_instance, stored.mig.compute_instance, stored.mig.uuid = (
            made.gpu_instance,
            made.compute_instance,
            made.uuid,
        )
        return self._preparer.mig_edits(card, made)

    def _whole_card(self, ctx: StepContext, plan: ClaimPlan, planned: PlannedDevice) -> ContainerEdits:
        card = planned.card
        if self._preparer.mig_enabled(card):
            if self._preparer.mig_devices(card):
                raise PrepareFailedError(
                    "CardInMigUse",
                    f"claim {plan}: card {card} has MIG devices; a whole-card claim cannot use it",
                )
            self._preparer.set_mig_mode(card, enabled=False)  # left in MIG mode, empty (spec §8.2)
            ctx.changed_cards.add(card)
        return self._preparer.card_edits(card)

    def _require_free(self, plan: ClaimPlan, card: str, ctx: StepContext) -> None:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        others = [c for c in checkpoint.claims_on_card(card) if c.uid != plan.uid]
        if others:
            raise PrepareFailedError(
                "CardBusy",
                f"claim {plan}: card {card} must switch to MIG mode but is prepared for {others[0]}",
            )
        if processes := list(self._preparer.processes(card)):
            raise PrepareFailedError(
                "CardBusy",
                f"claim {plan}: card {card} must switch to MIG mode but runs processes {processes}",
            )


class ConfigureSharing:
    name = "configure-sharing"

    def __init__(self, sharing: CardSharing) -> None:
        self._sharing = sharing

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        plan = ctx.require(ctx.plan, "the plan", self.name)
        record = checkpoint.claims[plan.uid]
        try:
            for device in record.devices:
                if device.sharing is not None:
                    ctx.edits[device.device] = self._sharing.set_up(device)
        except Exception:
            self.rollback(ctx)
            raise
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims.get(ctx.claim.uid)
        if record is not None:
            self._sharing.release(record, remaining=checkpoint.claims.values())


class WriteCdiSpec:
    name = "write-cdi-spec"

    def __init__(self, cdi: CdiSpecs) -> None:
        self._cdi = cdi

    def take(self, ctx: StepContext) -> StepOutcome:
        plan = ctx.require(ctx.plan, "the plan", self.name)
        if missing := [d.device for d in plan.devices if d.device not in ctx.edits]:
            raise StepOrderError(
                f"step {self.name!r} needs the container edits of {missing}, which no step made"
            )
        ids = self._cdi.write(ctx.claim.uid, ctx.edits)
        ctx.cdi_device_ids = dict(zip(ctx.edits, ids, strict=True))
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        self._cdi.remove(ctx.claim.uid)


class RecordCompleted:
    name = "record-completed"

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims[ctx.claim.uid]
        for device in record.devices:
            device.cdi_device_ids = [ctx.cdi_device_ids[device.device]]
        record.state = ClaimState.PREPARE_COMPLETED
        record.updated = datetime.now(UTC)
        self._store.save(checkpoint)
        ctx.answer = answer_of(record)
        return Continue()


def answer_of(record: ClaimRecord) -> PrepareOutcome:
    """What the kubelet is told about a prepared claim."""
    return PrepareOutcome(
        devices=tuple(
            PreparedDevice(
                pool=d.pool,
                device=d.device,
                cdi_device_ids=tuple(d.cdi_device_ids),
                requests=tuple(d.requests),
                share_id=d.share_id,
            )
            for d in record.devices
        )
    )
