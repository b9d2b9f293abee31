"""Prepare, one claim: one straight function, read top to bottom, each phase a crash point.

:meth:`ClaimPreparer.prepare` runs, under the node lock (:mod:`.driver` takes it):

1. ``load-checkpoint`` — the node's record, read fresh.
2. ``recorded-answer`` — a claim already ``PrepareCompleted`` gets its recorded answer and
   nothing else happens: the kubelet retries and restarts, and a second prepare must change
   nothing.
3. ``plan`` — the claim read fresh from the API server and turned into the devices this node must
   prepare (:mod:`.plan`); a vGPU only for a VM's Pod, with its mdev UUID chosen
   (:mod:`.vgpu_plan`); when the Pod reserving it asks for VFIO passthrough, whether it may
   have it and which functions go with each card (:mod:`.vfio_plan`; a retry keeps the drivers an
   earlier, unfinished attempt recorded, which sysfs no longer shows).
4. ``refuse-double-allocation`` — a device, its card or an overlapping MIG placement already
   prepared for another claim is refused: two allocators raced.
5. ``driver-files`` — the node's base CDI spec current for the loaded driver (:mod:`.driver_spec`),
   for a claim with a device a container uses (not one passed through to a VM): a driver upgrade
   reaches this claim's containers, and a driver root that is missing or incomplete fails here,
   before anything changes on the node.
6. ``record-started`` — the claim recorded ``PrepareStarted`` with everything a release needs
   (placements, shares, the functions' drivers), durably, before anything changes on the node.
7. ``prepare-devices`` — each device by its kind (:mod:`.kinds`), which returns the device's
   container edits.
8. ``write-cdi-spec`` — one spec for the claim, from those edits.
9. ``record-completed`` — the MIG instances' IDs and the CDI device IDs recorded (the claim's
   device, then the base spec's), the claim ``PrepareCompleted``; the answer for the kubelet.

One ``try``: a failure after ``record-started`` rolls the claim back through the one release
order (:mod:`.release`), putting a card whose MIG mode this attempt switched back as it was found,
and then forgets the record (a failed release keeps it, ``PrepareStarted``, for the retry or
start-up to finish). A crash
anywhere leaves a ``PrepareStarted`` record that start-up (:mod:`.startup`) releases, or that the
kubelet's retry prepares again: every phase is idempotent. The phases' names are the crash points
(:data:`~.crash.PREPARE_POINTS`); :class:`Attempt` is what one call did, for the driver's answer,
log, events and metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kubernetes.client import ResourceV1ResourceClaim

from api.gpu.v1alpha1 import SharingStrategy
from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import ClaimRef, PreparedDevice, PrepareOutcome
from pkg.gpuhandler.preparation import crash
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    CheckpointStore,
    ClaimRecord,
    DeviceRecord,
    MigRecord,
    PartitionRecord,
    PrepareState,
    SharingRecord,
    VfioFunctionRecord,
    VfioRecord,
    VgpuRecord,
)
from pkg.gpuhandler.preparation.claim_ref import validate_claim_ref
from pkg.gpuhandler.preparation.driver_spec import DriverSpec
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
from pkg.gpuhandler.preparation.release import FOUND_MIG_MODES, ClaimRelease
from pkg.gpuhandler.preparation.services import ClaimReader, OfferIndex, PodReader
from pkg.gpuhandler.preparation.vfio_holds import VfioHolds
from pkg.gpuhandler.preparation.vfio_plan import HostKind, plan_vfio, vfio_requested
from pkg.gpuhandler.preparation.vgpu_plan import plan_vgpus

logger = logging.getLogger(__name__)


@dataclass
class Attempt:
    """What one Prepare or Unprepare of a claim did.

    ``answer`` is the kubelet's (Prepare, when it succeeded); ``error`` and ``failed_at`` (the
    phase) say why not; ``note`` why it ended early, if it did. ``plan`` names the devices in a
    failure's events, even when the plan itself was refused (VFIO). ``changed_cards`` are the
    cards whose mode changed, ``checkpoint`` the record as the call left it (the VFIO holds
    follow it).
    """

    pipeline: str
    crash_at: tuple[str, crash.When] | None = None
    answer: PrepareOutcome | None = None
    error: Exception | None = None
    failed_at: str | None = None
    note: str = "done"
    plan: ClaimPlan | None = None
    changed_cards: set[str] = field(default_factory=set)
    checkpoint: CheckpointData | None = None

    @contextmanager
    def phase(self, point: str) -> Iterator[None]:
        """One phase, named for its crash point: dies before or after it when ``crash_at`` names
        it there; a failure in it is noted as ``failed_at``."""
        if self.crash_at == (point, "before"):
            crash.die(f"{self.pipeline}:{point}:before")
        try:
            yield
        except Exception:
            self.failed_at = point
            raise
        if self.crash_at == (point, "after"):
            crash.die(f"{self.pipeline}:{point}:after")


class ClaimPreparer:
    def __init__(
        self,
        *,
        store: CheckpointStore,
        claims: ClaimReader,
        offers: OfferIndex,
        pods: PodReader,
        host: HostKind,
        sysfs_root: Path,
        pool: str,
        kinds: Kinds,
        release: ClaimRelease,
        cdi: CdiSpecs,
        holds: VfioHolds,
        driver: DriverSpec,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._store = store
        self._claims = claims
        self._offers = offers
        self._pods = pods
        self._host = host
        self._sysfs_root = sysfs_root
        self._pool = pool
        self._kinds = kinds
        self._release = release
        self._cdi = cdi
        self._holds = holds
        self._driver = driver
        self._crash_at = crash.crash_at("prepare", crash.PREPARE_POINTS, environ)

    def prepare(self, claim: ClaimRef) -> Attempt:
        """Prepares ``claim`` (call with the node lock held); never raises for a failure."""
        attempt = Attempt("prepare", self._crash_at)
        started: ClaimWork | None = None  # from record-started on: what a rollback releases
        try:
            validate_claim_ref(claim)  # InvalidClaim before its UID reaches a path (claim_ref)
            with attempt.phase("load-checkpoint"):
                attempt.checkpoint = checkpoint = self._store.load()

            with attempt.phase("recorded-answer"):
                recorded = checkpoint.claims.get(claim.uid)
                if recorded is not None and recorded.state is PrepareState.PREPARE_COMPLETED:
                    attempt.answer = answer_of(recorded)
                    attempt.note = "already prepared: the recorded answer"
                    return attempt

            with attempt.phase("plan"):
                resource = read_claim(self._claims, claim)
                attempt.plan = plan = plan_devices(resource, pool=self._pool, offers=self._offers)
                for_vm = vfio_requested(resource, self._pods)
                earlier = checkpoint.claims.get(plan.uid)
                attempt.plan = plan = plan_vgpus(plan, for_vm=for_vm, earlier=earlier)
                if for_vm and any(d.vgpu is None for d in plan.devices):
                    plan = plan_vfio(plan, host=self._host, sysfs_root=self._sysfs_root)
                    attempt.plan = plan = with_recorded_drivers(plan, earlier)

            with attempt.phase("refuse-double-allocation"):
                refuse_double_allocation(plan, checkpoint)

            with attempt.phase("driver-files"):
                driver_id = self._driver.device_id() if any(_in_container(d) for d in plan.devices) else None

            with attempt.phase("record-started"):
                record = record_started(plan)
                checkpoint.claims[plan.uid] = record
                self._store.save(checkpoint)
                # A card to pass through is held before it leaves the NVIDIA driver, so the
                # enrichment never takes the bind for a lost card (the driver tells the holds
                # again, with the outcome, at the end of the call).
                self._holds.update(checkpoint)
                started = work = ClaimWork(
                    record=record,
                    checkpoint=checkpoint,
                    resource=resource,
                    changed_cards=attempt.changed_cards,
                )

            with attempt.phase("prepare-devices"):
                # Keyed by device and share ID: two shares of one card in one claim are two CDI
                # devices, each with its own limits.
                edits = {cdi_key(d): self._kinds.of(d).prepare(d, work) for d in record.devices}

            with attempt.phase("write-cdi-spec"):
                cdi_ids = dict(zip(edits, self._cdi.write(claim.uid, edits), strict=True))

            with attempt.phase("record-completed"):
                record_completed(record, cdi_ids, driver_id)
                self._store.save(checkpoint)
        except Exception as exc:
            attempt.error = exc
            if started is not None:
                self._roll_back(started, attempt)
            return attempt
        attempt.answer = answer_of(record)
        return attempt

    def _roll_back(self, work: ClaimWork, attempt: Attempt) -> None:
        """Releases whatever this attempt did, then forgets the claim. A failed release keeps the
        claim's ``PrepareStarted`` record: it owns what is still on the node (a MIG device that
        would not go, the card's functions on vfio-pci), so no orphan sweep mistakes it for free,
        and the kubelet's retry or start-up releases it again. A rollback's own failure is
        logged: the answer is the failure that caused it."""
        record, checkpoint = work.record, work.checkpoint
        try:
            try:
                changed = self._release.release(record, checkpoint, found_mig_modes=work.found_mig_modes)
            except Exception:
                attempt.changed_cards |= work.changed_cards
                if work.found_mig_modes:  # the kept record says which mode to put back
                    remember_found_mig_modes(record, work.found_mig_modes)
                    self._store.save(checkpoint)
                raise
            attempt.changed_cards |= changed
            forget(self._store, checkpoint, record.uid)
        except Exception as exc:
            logger.error(
                "rolling back claim %s failed: %s", record, exc, exc_info=exc, extra={"claim_uid": record.uid}
            )


def remember_found_mig_modes(record: ClaimRecord, modes: Mapping[str, bool]) -> None:
    """Keeps on ``record`` the MIG modes this attempt found its cards in, for whoever finishes its
    release (:meth:`~.release.ClaimRelease.release`). An extra field of the record: readers that
    do not know it keep it, and records without it load as before."""
    setattr(record, FOUND_MIG_MODES, dict(sorted(modes.items())))


def forget(store: CheckpointStore, checkpoint: CheckpointData, uid: str) -> None:
    """The claim's record removed, durably."""
    checkpoint.claims.pop(uid, None)
    store.save(checkpoint)


def read_claim(claims: ClaimReader, claim: ClaimRef) -> ResourceV1ResourceClaim:
    """The claim as the API server has it now; the kubelet's UID must still be its UID."""
    try:
        resource = claims.get(claim.namespace, claim.name)
    except NotFoundError:
        raise PrepareFailedError(
            "ClaimNotFound", f"claim {claim.namespace}/{claim.name} does not exist"
        ) from None
    uid = resource.metadata.uid if resource.metadata else None
    if uid != claim.uid:
        raise PrepareFailedError(
            "ClaimNotFound", f"claim {claim.namespace}/{claim.name} is now {uid}, not {claim.uid}"
        )
    return resource


def plan_devices(resource: ResourceV1ResourceClaim, *, pool: str, offers: OfferIndex) -> ClaimPlan:
    """The devices of ``resource`` this node prepares (:func:`~.plan.plan_claim`)."""
    try:
        return plan_claim(resource, pool=pool, offers=offers.device)
    except PlanError as exc:
        raise PrepareFailedError("InvalidAllocation", str(exc)) from None


def with_recorded_drivers(plan: ClaimPlan, earlier: ClaimRecord | None) -> ClaimPlan:
    """``plan`` with the functions' drivers as an earlier, unfinished attempt recorded them: from
    before its first bind, which sysfs no longer shows while a function is still on vfio-pci."""
    if earlier is None:
        return plan
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


def refuse_double_allocation(plan: ClaimPlan, checkpoint: CheckpointData) -> None:
    """Raises when a device of ``plan`` cannot be prepared next to what other claims hold."""
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


def record_started(plan: ClaimPlan) -> ClaimRecord:
    """The claim's record before anything changes on the node: all a release needs."""
    return ClaimRecord(
        uid=plan.uid,
        namespace=plan.namespace,
        name=plan.name,
        state=PrepareState.PREPARE_STARTED,
        devices=[_record(device) for device in plan.devices],
        updated=datetime.now(UTC),
    )


def record_completed(record: ClaimRecord, cdi_ids: Mapping[str, str], driver_id: str | None) -> None:
    """``record`` completed: each device's CDI device ID (by :func:`cdi_key`) and, for a device a
    container uses, the base spec's (``driver_id``); ``PrepareCompleted``."""
    for device in record.devices:
        device.cdi_device_ids = [cdi_ids[cdi_key(device)]]
        if driver_id is not None and device.vfio is None and device.vgpu is None:
            device.cdi_device_ids.append(driver_id)
    record.state = PrepareState.PREPARE_COMPLETED
    record.updated = datetime.now(UTC)


def cdi_key(device: DeviceRecord) -> str:
    """The name of ``device``'s CDI device within its claim: the DRA device name, and for a share
    its share ID too (one claim may hold two shares of one card, each with its own limits). The
    CDI device IDs are recorded per device, so records written before keep answering as written."""
    return device.device if device.share_id is None else f"{device.device}-{device.share_id}"


def _in_container(device: PlannedDevice) -> bool:
    """Whether a container uses the device through the NVIDIA driver (not a VM's device)."""
    return device.vfio is None and device.vgpu is None


def _conflict(device: PlannedDevice, held: DeviceRecord) -> tuple[str, str] | None:
    """Why two devices cannot both be prepared on one card (a reason and a phrase), or None.

    MIG devices fit together when their placements do not overlap; partitions when they are distinct
    partitions of one card-wide mode; shares fit together when they
    are shares of one strategy with distinct share IDs and, for TimeSlicing, the same time slice;
    vGPUs fit together unless they are the same offer (the kernel refuses a type the card cannot
    take next to the others, :mod:`.kinds.vgpu`); anything else next to anything on the card is
    one GPU handed out twice.
    """
    if device.vgpu is not None and held.vgpu is not None:
        return ("DoubleAllocation", "is already prepared") if device.device == held.device else None
    if device.mig is not None and held.mig is not None:
        mine = set(range(device.mig.start, device.mig.start + device.mig.size))
        theirs = set(range(held.mig.placement_start, held.mig.placement_start + held.mig.placement_size))
        return ("DoubleAllocation", "overlaps a prepared MIG device") if mine & theirs else None
    if device.partition is not None and held.partition is not None:
        if device.partition.mode != held.partition.mode:
            return (
                "DoubleAllocation",
                f"needs partition mode {device.partition.mode}, the card is in {held.partition.mode}",
            )
        if device.partition.index == held.partition.index:
            return "DoubleAllocation", "is a partition already prepared"
        return None
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


def _record(device: PlannedDevice) -> DeviceRecord:
    mig = None
    if device.mig is not None:
        mig = MigRecord(
            profile_id=device.mig.profile_id, placement_start=device.mig.start, placement_size=device.mig.size
        )
    partition = None
    if device.partition is not None:
        partition = PartitionRecord(
            mode=device.partition.mode, count=device.partition.count, index=device.partition.index
        )
    vfio = None
    if device.vfio is not None:
        vfio = VfioRecord(
            iommu_group=device.vfio.iommu_group,
            functions=[VfioFunctionRecord(address=f.address, driver=f.driver) for f in device.vfio.functions],
        )
    vgpu = None
    if device.vgpu is not None:
        vgpu = VgpuRecord(mdev_type=device.vgpu.mdev_type, mdev_uuid=device.vgpu.mdev_uuid)
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
        partition=partition,
        sharing=sharing,
        vfio=vfio,
        vgpu=vgpu,
    )


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
