"""Prepare, one claim: a straight pipeline whose steps are named for the crash points.

1. ``load-checkpoint`` — the node's record, read fresh under the node lock.
2. ``recorded-answer`` — a claim already ``PrepareCompleted`` gets its recorded answer (Stop):
   the kubelet retries and restarts, and a second prepare must change nothing.
3. ``plan`` — the claim read fresh from the API server and turned into the devices this node must
   prepare (:mod:`.plan`); when the Pod reserving it asks for VFIO passthrough, whether it may
   have it and which functions go with each card (:mod:`.vfio_plan`; a retry keeps the drivers an
   earlier, unfinished attempt recorded, which sysfs no longer shows).
4. ``refuse-double-allocation`` — a device, its card or an overlapping MIG placement already
   prepared for another claim is refused: two allocators raced.
5. ``record-started`` — the claim recorded ``PrepareStarted`` with everything a release needs
   (placements, shares, the functions' drivers), durably, before anything changes on the node.
6. ``prepare-devices`` — each device by its kind (:mod:`.kinds`), which returns the device's
   container edits.
7. ``write-cdi-spec`` — one spec for the claim, from those edits.
8. ``record-completed`` — the MIG instances' IDs and the CDI device IDs recorded, the claim
   ``PrepareCompleted``; the answer for the kubelet.

A failure after ``record-started`` rolls the claim back through the one release order
(:mod:`.release`), putting a card whose MIG mode this attempt switched back as it was found, and
then forgets the record. A crash anywhere leaves a ``PrepareStarted`` record that start-up
(:mod:`.startup`) releases, or that the kubelet's retry prepares again: every step is
idempotent.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from api.gpu.v1alpha1 import SharingStrategy
from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import PreparedDevice, PrepareOutcome
from pkg.framework.steptaker import Continue, StepOutcome, Stop
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    ClaimRecord,
    DeviceRecord,
    MigRecord,
    PrepareState,
    SharingRecord,
    VfioFunctionRecord,
    VfioRecord,
)
from pkg.gpuhandler.preparation.context import StepContext, StepOrderError
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork, Kinds
from pkg.gpuhandler.preparation.plan import (
    ClaimPlan,
    PlanError,
    PlannedDevice,
    VfioFunction,
    VfioPlan,
    plan_claim,
)
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.services import CheckpointStore, ClaimReader, OfferIndex, PodReader
from pkg.gpuhandler.preparation.vfio_plan import HostKind, plan_vfio, vfio_requested


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
        if record is None or record.state is not PrepareState.PREPARE_COMPLETED:
            return Continue()
        ctx.answer = answer_of(record)
        return Stop("already prepared: the recorded answer")


class PlanClaim:
    name = "plan"

    def __init__(
        self,
        *,
        claims: ClaimReader,
        offers: OfferIndex,
        pool: str,
        pods: PodReader,
        host: HostKind,
        sysfs_root: Path,
    ) -> None:
        self._claims = claims
        self._offers = offers
        self._pool = pool
        self._pods = pods
        self._host = host
        self._sysfs_root = sysfs_root

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
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
            plan = plan_claim(resource, pool=self._pool, offers=self._offers.device)
        except PlanError as exc:
            raise PrepareFailedError("InvalidAllocation", str(exc)) from None
        ctx.plan = plan  # named in the failure's events even when VFIO is refused
        if vfio_requested(resource, self._pods):
            plan = plan_vfio(plan, host=self._host, sysfs_root=self._sysfs_root)
            earlier = checkpoint.claims.get(plan.uid)
            ctx.plan = _with_recorded_drivers(plan, earlier) if earlier is not None else plan
        return Continue()


def _with_recorded_drivers(plan: ClaimPlan, earlier: ClaimRecord) -> ClaimPlan:
    """``plan`` with the functions' drivers as an earlier, unfinished attempt recorded them: from
    before its first bind, which sysfs no longer shows while a function is still on vfio-pci."""
    recorded = {d.device: d.vfio for d in earlier.devices if d.vfio is not None}
    devices = []
    for planned in plan.devices:
        found = recorded.get(planned.device)
        if found is None or planned.vfio is None:
            devices.append(planned)
            continue
        functions = tuple(VfioFunction(address=f.address, driver=f.driver) for f in found.functions)
        vfio = VfioPlan(iommu_group=found.iommu_group, functions=functions)
        devices.append(dataclasses.replace(planned, vfio=vfio))
    return dataclasses.replace(plan, devices=tuple(devices))


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

    def __init__(self, store: CheckpointStore, release: ClaimRelease) -> None:
        self._store = store
        self._release = release

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        plan = ctx.require(ctx.plan, "the plan", self.name)
        checkpoint.claims[plan.uid] = ClaimRecord(
            uid=plan.uid,
            namespace=plan.namespace,
            name=plan.name,
            state=PrepareState.PREPARE_STARTED,
            devices=[_record(device) for device in plan.devices],
            updated=datetime.now(UTC),
        )
        self._store.save(checkpoint)
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        """Releases whatever the later steps did, then forgets the claim; a failed release keeps
        a record that alone says how to finish it."""
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims.get(ctx.claim.uid)
        if record is None:
            return
        try:
            changed = self._release.release(record, checkpoint, found_mig_modes=ctx.found_mig_modes)
        except Exception:
            if not self._release.record_needed(record):
                self._forget(checkpoint, ctx.claim.uid)
            raise
        ctx.changed_cards |= changed
        self._forget(checkpoint, ctx.claim.uid)

    def _forget(self, checkpoint: CheckpointData, uid: str) -> None:
        del checkpoint.claims[uid]
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
    """Each recorded device by its kind; a failure is released by ``record-started``'s rollback."""

    name = "prepare-devices"

    def __init__(self, kinds: Kinds) -> None:
        self._kinds = kinds

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        work = ClaimWork(
            record=checkpoint.claims[ctx.claim.uid],
            checkpoint=checkpoint,
            resource=ctx.require(ctx.resource, "the claim", self.name),
            changed_cards=ctx.changed_cards,
            found_mig_modes=ctx.found_mig_modes,
        )
        for device in work.record.devices:
            ctx.edits[device.device] = self._kinds.of(device).prepare(device, work)
        return Continue()


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


class RecordCompleted:
    name = "record-completed"

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims[ctx.claim.uid]
        for device in record.devices:
            device.cdi_device_ids = [ctx.cdi_device_ids[device.device]]
        record.state = PrepareState.PREPARE_COMPLETED
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
