"""Prepare's steps, each a small class with its undo: the order is declared once, in the
composition root (:mod:`.setup`), and run by the framework's StepTaker
(:class:`~pkg.framework.steptaker.Pipeline`).

=========================== ===============================================================
step                        what it does (and what its undo gives back)
=========================== ===============================================================
``load-checkpoint``         the node's record, read fresh
``recorded-answer``         a claim already ``PrepareCompleted`` gets its recorded answer and
                            the pipeline stops: the kubelet retries and restarts, and a second
                            prepare must change nothing
``plan``                    the claim read fresh from the API server and planned for this node,
                            each device by its kind (:mod:`.plan`, :mod:`.kinds`)
``refuse-double-allocation`` a device conflicting with one another claim holds on its card
                            is refused: two allocators raced
``driver-files``            the base CDI spec and the capability specs current for the loaded
                            driver, and each device's driver CDI IDs (its config's
                            ``driverCapabilities``), for a claim a container uses
                            (:class:`~.cdi.DriverSpec`); not applicable to a VM's
``record-started``          the claim recorded ``PrepareStarted`` with all a release needs,
                            durably, before anything changes on the node (undo: forget it)
``prepare-devices``         each device by its kind (undo: release them, last first, and put
                            back the MIG mode each card was found in)
``write-cdi-spec``          one spec for the claim, from the kinds' edits (undo: remove it)
``record-completed``        the CDI device IDs recorded, the claim ``PrepareCompleted``: the
                            answer for the kubelet (undo: the record is started again)
=========================== ===============================================================

A failure undoes the failed step and those before it, newest first; the first undo that fails
stops the rollback, so a release that could not finish keeps the claim's ``PrepareStarted`` record
(with the MIG modes to put back): it owns what is still on the node, and the kubelet's retry or
start-up finishes the release. Start-up releases a record a crash left behind through the same
undos (:meth:`~pkg.framework.steptaker.Pipeline.undo`). The step names are the crash points
(:mod:`.crash`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Final

from kubernetes.client import ResourceV1ResourceClaim

from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import ClaimRef, PreparedDevice, PrepareOutcome
from pkg.framework.steptaker import StepOutcome
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.cdi import CdiSpecs, DriverSpec
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    CheckpointStore,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
)
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork, Kinds, PlanError
from pkg.gpuhandler.preparation.plan import ClaimPlan, ClaimPlanner, driver_capabilities
from pkg.gpuhandler.preparation.release import ClaimRelease, remember_found_mig_modes
from pkg.gpuhandler.preparation.services import CheckpointListener, ClaimReader

DONE: Final = StepOutcome.DONE
logger = logging.getLogger(__name__)


class LoadCheckpoint:
    """The node's record, read fresh (the first step of Prepare and of Unprepare)."""

    name = "load-checkpoint"

    def __init__(self, store: CheckpointStore) -> None:
        self._store = store

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        attempt.checkpoint = self._store.load()
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """Reading changed nothing."""


class RecordedAnswer:
    """A claim already prepared is answered from its record, and nothing else happens."""

    name = "recorded-answer"

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        recorded = loaded(attempt).claims.get(attempt.claim.uid)
        if recorded is None or recorded.state is not PreparePhase.PREPARE_COMPLETED:
            return StepOutcome.NOT_APPLICABLE
        attempt.answer = answer_of(recorded)
        attempt.note = "already prepared: the recorded answer"
        return StepOutcome.STOP

    def undo(self, attempt: ClaimAttempt) -> None:
        """Answering changed nothing."""


class PlanDevices:
    """The claim read fresh and planned for this node, each device by its kind."""

    name = "plan"

    def __init__(self, *, claims: ClaimReader, planner: ClaimPlanner) -> None:
        self._claims = claims
        self._planner = planner

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        attempt.resource = resource = read_claim(self._claims, attempt.claim)
        try:
            attempt.offers = self._planner.offers(resource)
            earlier = loaded(attempt).claims.get(attempt.claim.uid)
            attempt.plan = self._planner.plan(resource, attempt.offers, earlier=earlier)
        except PlanError as exc:
            raise PrepareFailedError("InvalidAllocation", str(exc)) from None
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """Planning changed nothing on the node."""


class RefuseDoubleAllocation:
    """A device that cannot be prepared next to what other claims hold on its card is refused."""

    name = "refuse-double-allocation"

    def __init__(self, kinds: Kinds) -> None:
        self._kinds = kinds

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        refuse_double_allocation(planned(attempt), loaded(attempt), self._kinds)
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """Checking changed nothing."""


class DriverFiles:
    """The base CDI spec and the capability specs current for the loaded driver, for a claim with a
    device a container uses, and the driver's CDI device IDs of each such device: the base spec's,
    or the capability specs its config's ``driverCapabilities`` name. A driver upgrade reaches this
    claim's containers, and a driver root that is missing, incomplete or lacks an asked capability
    fails here, before anything changes on the node."""

    name = "driver-files"

    def __init__(self, *, driver: DriverSpec, kinds: Kinds) -> None:
        self._driver = driver
        self._kinds = kinds

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        plan = planned(attempt)
        containers = [d for d in plan.devices if self._kinds.in_container(d)]
        if not containers:
            return StepOutcome.NOT_APPLICABLE  # only a VM's devices: no driver files in the VM's Pod
        asked = {(o.name, o.result.share_id): driver_capabilities(o) for o in attempt.offers}
        for device in containers:
            attempt.driver_ids[cdi_key(device)] = self._driver.device_ids(
                asked.get((device.device, device.share_id)), asker=f"claim {plan}: device {device.device}"
            )
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """The base spec is the node's, shared by every claim: it stays."""


class RecordStarted:
    """The claim recorded ``PrepareStarted`` with everything a release needs, durably, before
    anything changes on the node; the checkpoint's listeners hear it before any card leaves its
    driver (a card passed through is held, not lost)."""

    name = "record-started"

    def __init__(self, *, store: CheckpointStore, listener: CheckpointListener) -> None:
        self._store = store
        self._listener = listener

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        plan, checkpoint = planned(attempt), loaded(attempt)
        record = record_started(plan)
        earlier = checkpoint.claims.get(plan.uid)
        checkpoint.claims[plan.uid] = record
        try:
            self._store.save(checkpoint)
        except Exception:  # the checkpoint in memory says what the file says: the earlier record
            if earlier is None:
                checkpoint.claims.pop(plan.uid, None)
            else:
                checkpoint.claims[plan.uid] = earlier
            raise
        attempt.record = record
        attempt.work = ClaimWork(
            record=record,
            checkpoint=checkpoint,
            resource=attempt.resource,
            changed_cards=attempt.changed_cards,
        )
        self._listener(checkpoint)
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """The claim forgotten, durably (only a record this attempt saved: a save that failed left
        the earlier one, which owns what an earlier attempt left)."""
        if attempt.record is not None:
            forget(self._store, loaded(attempt), attempt.record.uid)


class PrepareDevices:
    """Each device made ready by its kind, which returns its container edits."""

    name = "prepare-devices"

    def __init__(self, *, kinds: Kinds, release: ClaimRelease, store: CheckpointStore) -> None:
        self._kinds = kinds
        self._release = release
        self._store = store

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        record, work = started(attempt)
        # Keyed by device and share ID: two shares of one card in one claim are two CDI devices,
        # each with its own limits.
        attempt.edits = {cdi_key(d): self._kinds.of(d).prepare(d, work) for d in record.devices}
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """Every device released, last first, and each card's MIG mode put back as this attempt
        (or the one whose record this is) found it. A release that fails saves the record as it
        stands — started (``record-completed``'s undo ran first), with the modes to put back — and
        raises: the record stays and owns what is left, and the file never says otherwise (a save
        of ``record-completed`` may have reached the disk before it failed)."""
        if attempt.record is None:
            return
        record, work = started(attempt)
        try:
            attempt.changed_cards |= self._release.release_devices(
                record, loaded(attempt), found_mig_modes=work.found_mig_modes or None
            )
        except Exception:
            if work.found_mig_modes:  # the kept record says which mode to put back
                remember_found_mig_modes(record, work.found_mig_modes)
            try:
                self._store.save(loaded(attempt))
            except Exception as exc:  # the release's failure is the one to report
                logger.error("saving the kept record of claim %s failed: %s", record, exc)
            raise


class WriteCdiSpec:
    """One CDI spec for the claim, from the kinds' edits."""

    name = "write-cdi-spec"

    def __init__(self, cdi: CdiSpecs) -> None:
        self._cdi = cdi

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        ids = self._cdi.write(attempt.claim.uid, attempt.edits)
        attempt.cdi_ids = dict(zip(attempt.edits, ids, strict=True))
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        self._cdi.remove(attempt.claim.uid)


class RecordCompleted:
    """Each device's CDI device IDs recorded (its own, then the driver's for a device a container
    uses), the claim ``PrepareCompleted``, durably: the answer for the kubelet."""

    name = "record-completed"

    def __init__(self, *, store: CheckpointStore) -> None:
        self._store = store

    def take(self, attempt: ClaimAttempt) -> StepOutcome:
        record, _ = started(attempt)
        for device in record.devices:
            key = cdi_key(device)
            device.cdi_device_ids = [attempt.cdi_ids[key], *attempt.driver_ids.get(key, ())]
        record.state = PreparePhase.PREPARE_COMPLETED
        record.updated = datetime.now(UTC)
        self._store.save(loaded(attempt))
        attempt.answer = answer_of(record)
        return DONE

    def undo(self, attempt: ClaimAttempt) -> None:
        """The record is started again: whatever is saved next (a release that keeps it) must not
        say the claim was prepared."""
        if attempt.record is not None:
            attempt.record.state = PreparePhase.PREPARE_STARTED


def loaded(attempt: ClaimAttempt) -> CheckpointData:
    """The checkpoint ``load-checkpoint`` read."""
    assert attempt.checkpoint is not None, "load-checkpoint runs first"
    return attempt.checkpoint


def planned(attempt: ClaimAttempt) -> ClaimPlan:
    assert attempt.plan is not None, "plan runs before"
    return attempt.plan


def started(attempt: ClaimAttempt) -> tuple[ClaimRecord, ClaimWork]:
    """The record ``record-started`` saved, and the work the kinds report into."""
    assert attempt.record is not None, "record-started runs before"
    assert attempt.work is not None, "record-started runs before"
    return attempt.record, attempt.work


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


def refuse_double_allocation(plan: ClaimPlan, checkpoint: CheckpointData, kinds: Kinds) -> None:
    """Raises when a device of ``plan`` cannot be prepared next to what other claims hold."""
    others = [c for c in checkpoint.claims.values() if c.uid != plan.uid]
    for device in plan.devices:
        for other in others:
            for held in other.devices:
                if held.card != device.card:
                    continue
                conflict = kinds.conflict(device, held)
                if conflict is not None:
                    raise PrepareFailedError(
                        conflict.reason,
                        f"claim {plan}: device {device.device} on card {device.card} {conflict.problem} "
                        f"(device {held.device} of claim {other})",
                    )


def record_started(plan: ClaimPlan) -> ClaimRecord:
    """The claim's record before anything changes on the node: all a release needs."""
    return ClaimRecord(
        uid=plan.uid,
        namespace=plan.namespace,
        name=plan.name,
        state=PreparePhase.PREPARE_STARTED,
        devices=[d.model_copy(deep=True) for d in plan.devices],
        updated=datetime.now(UTC),
    )


def forget(store: CheckpointStore, checkpoint: CheckpointData, uid: str) -> None:
    """The claim's record removed, durably."""
    checkpoint.claims.pop(uid, None)
    store.save(checkpoint)


def cdi_key(device: DeviceRecord) -> str:
    """The name of ``device``'s CDI device within its claim: the DRA device name, and for a share
    its share ID too (one claim may hold two shares of one card, each with its own limits). The
    CDI device IDs are recorded per device, so records written before keep answering as written."""
    return device.device if device.share_id is None else f"{device.device}-{device.share_id}"


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
