"""Prepare's steps one at a time: what each sets on the attempt, the outcome it returns, what it asks
of its services, what it refuses and what its undo gives back.

Every collaborator is a ``create_autospec`` mock of its real class (a call the class does not have,
or one with the wrong arguments, fails the test); the attempt, the checkpoint and its records are
real. The pipelines over a simulated node are :mod:`test_preparation_straight`'s; here are also the
composition root's order and start-up's :class:`~pkg.gpuhandler.preparation.startup.RecordRelease`
over a real :class:`~pkg.framework.steptaker.Pipeline`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.preparation.step_values import (
    A30,
    A30_B,
    CLAIM,
    DRIVER_ID,
    OTHER_UID,
    POOL,
    T0,
    UID,
    attempt,
    checkpoint,
    device,
    record,
)

from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import ClaimRef, PreparedDevice, PrepareOutcome
from pkg.framework.steptaker import Pipeline, Step, StepOutcome
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.cdi import CdiSpecs, DriverSpec
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    CheckpointFeed,
    CheckpointStore,
    CheckpointUnreadable,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
)
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork, Conflict, DeviceKind, Kinds, PlanError
from pkg.gpuhandler.preparation.plan import ClaimPlan, ClaimPlanner
from pkg.gpuhandler.preparation.prepare_steps import (
    DriverFiles,
    LoadCheckpoint,
    PlanDevices,
    PrepareDevices,
    RecordCompleted,
    RecordedAnswer,
    RecordStarted,
    RefuseDoubleAllocation,
    WriteCdiSpec,
    answer_of,
    cdi_key,
    forget,
    record_started,
    refuse_double_allocation,
)
from pkg.gpuhandler.preparation.release import ClaimRelease, recorded_mig_modes
from pkg.gpuhandler.preparation.services import ClaimReader
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS, PreparationContainer
from pkg.gpuhandler.preparation.startup import RecordRelease
from pkg.gpuhandler.preparation.unprepare_steps import ForgetClaim, NothingToUnprepare, ReleaseClaim

DONE, NOT_APPLICABLE, STOP = StepOutcome.DONE, StepOutcome.NOT_APPLICABLE, StepOutcome.STOP


def planned(*devices: DeviceRecord, uid: str = UID) -> ClaimPlan:
    return ClaimPlan(namespace="team", name="train", uid=uid, devices=devices)


def resource(uid: str | None = UID) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(metadata=V1ObjectMeta(namespace="team", name="train", uid=uid))


def edits(path: str) -> ContainerEdits:
    return ContainerEdits(device_nodes=(DeviceNode(path=path, host_path=path),))


def started_attempt(rec: ClaimRecord, data: CheckpointData, **fields: Any) -> ClaimAttempt:
    """An attempt as ``record-started`` leaves it: the record saved, the work to report into."""
    a = attempt(data, record=rec, **fields)
    a.work = ClaimWork(record=rec, checkpoint=data, changed_cards=a.changed_cards)
    return a


# -- the services, autospecced ----------------------------------------------------------------------


@pytest.fixture
def store(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(CheckpointStore, instance=True)


@pytest.fixture
def kinds(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Kinds, instance=True)


@pytest.fixture
def cdi(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(CdiSpecs, instance=True)


@pytest.fixture
def release(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(ClaimRelease, instance=True)


def saved_states(store: MockType) -> list[dict[str, Any]]:
    """What each ``store.save`` was given, as it stood at the call (the checkpoint is mutable)."""
    saved: list[dict[str, Any]] = []
    store.save.side_effect = lambda data: saved.append(data.model_dump(mode="json", by_alias=True))
    return saved


# -- load-checkpoint --------------------------------------------------------------------------------


def test_load_checkpoint_puts_the_node_record_read_fresh_on_the_attempt(store: MockType) -> None:
    data = checkpoint(record())
    store.load.return_value = data
    a = ClaimAttempt(CLAIM)

    assert LoadCheckpoint(store).take(a) is DONE

    assert a.checkpoint is data
    store.load.assert_called_once_with()


def test_load_checkpoint_lets_an_unreadable_checkpoint_fail_and_its_undo_touches_nothing(
    mocker: MockerFixture, store: MockType
) -> None:
    unreadable = CheckpointUnreadable(Path("/plugins/checkpoint.json"), "checksum mismatch")
    store.load.side_effect = unreadable
    a = ClaimAttempt(CLAIM)
    step = LoadCheckpoint(store)

    with pytest.raises(CheckpointUnreadable) as raised:
        step.take(a)
    step.undo(a)

    assert raised.value is unreadable
    assert a.checkpoint is None
    assert store.mock_calls == [mocker.call.load()]


# -- recorded-answer --------------------------------------------------------------------------------


def test_recorded_answer_does_not_apply_to_a_claim_without_a_record() -> None:
    a = attempt(checkpoint(record(uid=OTHER_UID, name="other", state=PreparePhase.PREPARE_COMPLETED)))

    assert RecordedAnswer().take(a) is NOT_APPLICABLE
    assert (a.answer, a.note) == (None, "done")


def test_recorded_answer_does_not_apply_to_a_prepare_that_only_started() -> None:
    """A started record is an unfinished attempt: the pipeline goes on and finishes (or undoes) it."""
    a = attempt(checkpoint(record(device(cdi_ids=["x"]))))

    assert RecordedAnswer().take(a) is NOT_APPLICABLE
    assert a.answer is None


def test_recorded_answer_stops_a_completed_claim_with_its_recorded_answer() -> None:
    rec = record(
        device(cdi_ids=[f"k8s.gpu.deckhouse.io/claim={UID}-gpu-3b-mig-14-3", DRIVER_ID]),
        state=PreparePhase.PREPARE_COMPLETED,
    )
    a = attempt(checkpoint(rec))

    assert RecordedAnswer().take(a) is STOP

    assert a.answer == PrepareOutcome(
        devices=(
            PreparedDevice(
                pool=POOL,
                device="gpu-3b-mig-14-3",
                cdi_device_ids=(f"k8s.gpu.deckhouse.io/claim={UID}-gpu-3b-mig-14-3", DRIVER_ID),
                requests=("gpu",),
            ),
        )
    )
    assert a.note == "already prepared: the recorded answer"


# -- plan -------------------------------------------------------------------------------------------


@pytest.fixture
def claims(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(ClaimReader, instance=True)


@pytest.fixture
def planner(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(ClaimPlanner, instance=True)


def test_plan_reads_the_claim_fresh_and_plans_it_with_its_offers_and_earlier_record(
    mocker: MockerFixture, claims: MockType, planner: MockType
) -> None:
    earlier = record(device())
    claim = resource()
    offers = (mocker.sentinel.offer,)
    the_plan = planned(device())
    claims.get.return_value = claim
    planner.offers.return_value = offers
    planner.plan.return_value = the_plan
    a = attempt(checkpoint(earlier))

    assert PlanDevices(claims=claims, planner=planner).take(a) is DONE

    claims.get.assert_called_once_with("team", "train")
    planner.offers.assert_called_once_with(claim)
    planner.plan.assert_called_once_with(claim, offers, earlier=earlier)
    assert (a.resource, a.offers, a.plan) == (claim, offers, the_plan)


def test_plan_of_a_claim_never_recorded_has_no_earlier_record(claims: MockType, planner: MockType) -> None:
    claims.get.return_value = resource()
    planner.offers.return_value = ()
    a = attempt(checkpoint(record(uid=OTHER_UID, name="other")))

    PlanDevices(claims=claims, planner=planner).take(a)

    assert planner.plan.call_args.kwargs == {"earlier": None}


@pytest.mark.parametrize("failing", ["offers", "plan"])
def test_plan_turns_a_plan_error_into_invalid_allocation(
    claims: MockType, planner: MockType, failing: str
) -> None:
    claims.get.return_value = resource()
    planner.offers.return_value = ()
    getattr(planner, failing).side_effect = PlanError("claim team/train is not allocated")
    a = attempt()

    with pytest.raises(PrepareFailedError) as raised:
        PlanDevices(claims=claims, planner=planner).take(a)

    assert raised.value.reason == "InvalidAllocation"
    assert str(raised.value) == "claim team/train is not allocated"
    assert a.plan is None


def test_plan_keeps_the_offers_read_when_planning_them_is_refused(
    mocker: MockerFixture, claims: MockType, planner: MockType
) -> None:
    """The failure's events name the claim's cards from the offers."""
    claims.get.return_value = resource()
    planner.offers.return_value = (mocker.sentinel.offer,)
    planner.plan.side_effect = PlanError("no kind")
    a = attempt()

    with pytest.raises(PrepareFailedError):
        PlanDevices(claims=claims, planner=planner).take(a)

    assert a.offers == (mocker.sentinel.offer,)


def test_plan_lets_a_refusal_of_the_planner_through_with_its_own_reason(
    claims: MockType, planner: MockType
) -> None:
    refused = PrepareFailedError("VfioNotAllowed", "a MIG device for a VM")
    claims.get.return_value = resource()
    planner.offers.return_value = ()
    planner.plan.side_effect = refused

    with pytest.raises(PrepareFailedError) as raised:
        PlanDevices(claims=claims, planner=planner).take(attempt())

    assert raised.value is refused


def test_plan_refuses_a_claim_the_api_server_no_longer_has_as_claim_not_found(
    claims: MockType, planner: MockType
) -> None:
    claims.get.side_effect = NotFoundError(status=404, reason="NotFound", message="not found")

    with pytest.raises(PrepareFailedError) as raised:
        PlanDevices(claims=claims, planner=planner).take(attempt())

    assert (raised.value.reason, str(raised.value)) == ("ClaimNotFound", "claim team/train does not exist")
    assert planner.mock_calls == []


@pytest.mark.parametrize("uid", [OTHER_UID, None])
def test_plan_refuses_a_recreated_claim_as_claim_not_found(
    claims: MockType, planner: MockType, uid: str | None
) -> None:
    """Another UID under the same name is another claim: the kubelet's is gone."""
    claims.get.return_value = resource(uid)
    a = attempt()

    with pytest.raises(PrepareFailedError) as raised:
        PlanDevices(claims=claims, planner=planner).take(a)

    assert raised.value.reason == "ClaimNotFound"
    assert str(raised.value) == f"claim team/train is now {uid}, not {UID}"
    assert planner.mock_calls == []
    assert a.plan is None


# -- refuse-double-allocation -----------------------------------------------------------------------


def test_refuse_double_allocation_passes_a_device_its_kind_finds_no_conflict_for(kinds: MockType) -> None:
    mine, held = device("gpu-3b-mig-14-3"), device("gpu-3b-mig-14-0")
    kinds.conflict.return_value = None
    a = attempt(checkpoint(record(held, uid=OTHER_UID, name="other")), plan=planned(mine))

    assert RefuseDoubleAllocation(kinds).take(a) is DONE

    kinds.conflict.assert_called_once_with(mine, held)


def test_refuse_double_allocation_raises_the_conflicts_reason_naming_both_claims(kinds: MockType) -> None:
    mine, held = device("gpu-3b-mig-14-3"), device("gpu-3b-mig-14-2")
    other = record(held, uid=OTHER_UID, name="other", state=PreparePhase.PREPARE_COMPLETED)
    kinds.conflict.return_value = Conflict("MigPlacementOverlap", "overlaps a MIG device")
    a = attempt(checkpoint(other), plan=planned(mine))

    with pytest.raises(PrepareFailedError) as raised:
        RefuseDoubleAllocation(kinds).take(a)

    assert raised.value.reason == "MigPlacementOverlap"
    assert str(raised.value) == (
        f"claim team/train: device gpu-3b-mig-14-3 on card {A30} overlaps a MIG device "
        f"(device gpu-3b-mig-14-2 of claim team/other ({OTHER_UID}))"
    )


def test_refuse_double_allocation_compares_only_devices_on_the_same_card(kinds: MockType) -> None:
    kinds.conflict.return_value = Conflict("DoubleAllocation", "is already prepared")
    other = record(device("gpu-d8", A30_B), uid=OTHER_UID, name="other")

    refuse_double_allocation(planned(device("gpu-3b", A30)), checkpoint(other), kinds)

    kinds.conflict.assert_not_called()


def test_refuse_double_allocation_does_not_hold_the_claim_against_its_own_record(kinds: MockType) -> None:
    """A retry finds its own started record on the card: that is no second allocator."""
    kinds.conflict.return_value = Conflict("DoubleAllocation", "is already prepared")
    mine = device()

    refuse_double_allocation(planned(mine), checkpoint(record(mine.model_copy())), kinds)

    kinds.conflict.assert_not_called()


def test_refuse_double_allocation_counts_a_started_record_of_another_claim(kinds: MockType) -> None:
    """A half-prepared claim holds its devices until it is released."""
    kinds.conflict.return_value = Conflict("DoubleAllocation", "is already prepared")
    other = record(device(), uid=OTHER_UID, name="other", state=PreparePhase.PREPARE_STARTED)

    with pytest.raises(PrepareFailedError, match="is already prepared") as raised:
        refuse_double_allocation(planned(device()), checkpoint(other), kinds)

    assert raised.value.reason == "DoubleAllocation"


# -- driver-files -----------------------------------------------------------------------------------


@pytest.fixture
def driver(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(DriverSpec, instance=True)


def test_driver_files_does_not_apply_to_a_claim_of_vm_devices_only(kinds: MockType, driver: MockType) -> None:
    kinds.in_container.return_value = False
    devices = (device("gpu-3b", A30), device("gpu-d8", A30_B))
    a = attempt(plan=planned(*devices))

    assert DriverFiles(driver=driver, kinds=kinds).take(a) is NOT_APPLICABLE

    assert [c.args for c in kinds.in_container.call_args_list] == [(d,) for d in devices]
    driver.device_ids.assert_not_called()
    assert a.driver_ids == {}


def test_driver_files_gives_a_claim_a_container_uses_the_current_base_spec(
    kinds: MockType, driver: MockType
) -> None:
    kinds.in_container.side_effect = [False, True]  # a VM's device, then a container's
    driver.device_ids.return_value = (DRIVER_ID,)
    a = attempt(plan=planned(device("gpu-3b", A30), device("gpu-d8", A30_B)))

    assert DriverFiles(driver=driver, kinds=kinds).take(a) is DONE

    driver.device_ids.assert_called_once_with(None, asker="claim team/train: device gpu-d8")
    assert a.driver_ids == {"gpu-d8": (DRIVER_ID,)}


def test_driver_files_lets_a_missing_driver_root_fail_the_prepare_and_leaves_the_base_spec_on_undo(
    mocker: MockerFixture, kinds: MockType, driver: MockType
) -> None:
    kinds.in_container.return_value = True
    refused = PrepareFailedError("DriverRootMissing", "no libcuda.so")
    driver.device_ids.side_effect = refused
    a = attempt(plan=planned(device()))
    step = DriverFiles(driver=driver, kinds=kinds)

    with pytest.raises(PrepareFailedError) as raised:
        step.take(a)
    step.undo(a)

    assert raised.value is refused
    assert a.driver_ids == {}
    asked = mocker.call.device_ids(None, asker="claim team/train: device gpu-3b-mig-14-3")
    assert driver.mock_calls == [asked]  # the base spec is every claim's: it stays


# -- record-started ---------------------------------------------------------------------------------


@pytest.fixture
def listener(mocker: MockerFixture) -> MockType:
    publish: MockType = mocker.create_autospec(CheckpointFeed, instance=True).publish
    return publish


def test_record_started_saves_the_plan_as_started_before_the_listeners_hear_it(
    store: MockType, listener: MockType
) -> None:
    events: list[str] = []
    store.save.side_effect = lambda data: events.append(f"save:{data.claims[UID].state.value}")
    listener.side_effect = lambda data: events.append(f"listener:{sorted(data.claims)}")
    other = record(device("gpu-d8", A30_B), uid=OTHER_UID, name="other")
    data = checkpoint(other)
    claim = resource()
    the_plan = planned(device("gpu-3b-mig-14-3"), device("gpu-3b-mig-14-0"))
    a = attempt(data, plan=the_plan, resource=claim)

    assert RecordStarted(store=store, listener=listener).take(a) is DONE

    assert events == ["save:PrepareStarted", f"listener:{sorted([UID, OTHER_UID])}"]
    store.save.assert_called_once_with(data)
    listener.assert_called_once_with(data)
    rec = data.claims[UID]
    assert a.record is rec
    assert (rec.uid, rec.namespace, rec.name) == (UID, "team", "train")
    assert rec.state is PreparePhase.PREPARE_STARTED
    assert rec.devices == list(the_plan.devices)
    assert data.claims[OTHER_UID] is other
    assert a.work is not None
    assert (a.work.record, a.work.checkpoint, a.work.resource) == (rec, data, claim)
    assert a.work.changed_cards is a.changed_cards  # what the kinds report reaches the driver


def test_record_started_replaces_the_record_of_an_earlier_unfinished_attempt(
    store: MockType, listener: MockType
) -> None:
    earlier = record(device("gpu-3b-mig-14-0"))
    data = checkpoint(earlier)
    a = attempt(data, plan=planned(device("gpu-3b-mig-14-3")))

    RecordStarted(store=store, listener=listener).take(a)

    assert [d.device for d in data.claims[UID].devices] == ["gpu-3b-mig-14-3"]
    assert a.record is not earlier


def test_record_started_that_could_not_save_tells_nobody_and_its_undo_forgets_nothing(
    store: MockType, listener: MockType
) -> None:
    """The save that failed left the earlier record on disk, which owns what an earlier attempt left."""
    store.save.side_effect = OSError(28, "No space left on device")
    a = attempt(checkpoint(), plan=planned(device()))
    step = RecordStarted(store=store, listener=listener)

    with pytest.raises(OSError, match="No space left"):
        step.take(a)
    step.undo(a)

    listener.assert_not_called()
    assert a.record is None
    assert store.save.call_count == 1  # the take's only


def test_record_started_that_could_not_save_leaves_the_checkpoint_as_the_file_says(
    store: MockType, listener: MockType
) -> None:
    """The listeners are told the checkpoint as the call left it: never a record that is not on disk."""
    store.save.side_effect = OSError(28, "No space left on device")
    earlier = record(device("gpu-3b-mig-14-0"))
    data = checkpoint(earlier)
    a = attempt(data, plan=planned(device("gpu-3b-mig-14-3")))

    with pytest.raises(OSError, match="No space left"):
        RecordStarted(store=store, listener=listener).take(a)

    assert data.claims[UID] is earlier
    fresh = checkpoint()
    with pytest.raises(OSError, match="No space left"):
        RecordStarted(store=store, listener=listener).take(attempt(fresh, plan=planned(device())))
    assert fresh.claims == {}


def test_record_started_undo_forgets_the_record_it_saved_durably(store: MockType, listener: MockType) -> None:
    other = record(uid=OTHER_UID, name="other")
    data = checkpoint(other)
    a = attempt(data, plan=planned(device()))
    step = RecordStarted(store=store, listener=listener)
    step.take(a)
    saved = saved_states(store)

    step.undo(a)

    assert list(data.claims) == [OTHER_UID]
    assert [list(s["claims"]) for s in saved] == [[OTHER_UID]]


# -- prepare-devices --------------------------------------------------------------------------------


def test_prepare_devices_prepares_each_device_by_its_kind_keyed_by_device_and_share(
    mocker: MockerFixture, kinds: MockType, release: MockType, store: MockType
) -> None:
    whole = device("gpu-3b", A30)
    share = device("gpu-d8-ts", A30_B, share_id="s-1")
    rec = record(whole, share)
    a = started_attempt(rec, checkpoint(rec))
    kind = mocker.create_autospec(DeviceKind, instance=True)
    kind.prepare.side_effect = lambda d, work: edits(f"/dev/{d.device}")
    kinds.of.return_value = kind

    assert PrepareDevices(kinds=kinds, release=release, store=store).take(a) is DONE

    assert a.edits == {"gpu-3b": edits("/dev/gpu-3b"), "gpu-d8-ts-s-1": edits("/dev/gpu-d8-ts")}
    assert kinds.of.call_args_list == [mocker.call(whole), mocker.call(share)]
    assert kind.prepare.call_args_list == [mocker.call(whole, a.work), mocker.call(share, a.work)]
    release.release_devices.assert_not_called()


def test_prepare_devices_lets_a_failing_kind_fail_the_step(
    mocker: MockerFixture, kinds: MockType, release: MockType, store: MockType
) -> None:
    rec = record(device())
    a = started_attempt(rec, checkpoint(rec))
    kind = mocker.create_autospec(DeviceKind, instance=True)
    kind.prepare.side_effect = PrepareFailedError("CardBusy", "runs processes [31337]")
    kinds.of.return_value = kind

    with pytest.raises(PrepareFailedError, match="31337"):
        PrepareDevices(kinds=kinds, release=release, store=store).take(a)

    assert a.edits == {}


def test_prepare_devices_undo_releases_the_devices_and_adds_the_changed_cards(
    kinds: MockType, release: MockType, store: MockType
) -> None:
    rec = record(device())
    data = checkpoint(rec)
    a = started_attempt(rec, data, changed_cards={A30_B})
    release.release_devices.return_value = {A30}

    PrepareDevices(kinds=kinds, release=release, store=store).undo(a)

    release.release_devices.assert_called_once_with(rec, data, found_mig_modes=None)
    assert a.changed_cards == {A30, A30_B}
    store.save.assert_not_called()


def test_prepare_devices_undo_puts_back_the_mig_modes_this_attempt_found(
    kinds: MockType, release: MockType, store: MockType
) -> None:
    rec = record(device())
    data = checkpoint(rec)
    a = started_attempt(rec, data)
    assert a.work is not None
    a.work.mig_mode_changed(A30, found=False)
    release.release_devices.return_value = {A30}

    PrepareDevices(kinds=kinds, release=release, store=store).undo(a)

    release.release_devices.assert_called_once_with(rec, data, found_mig_modes={A30: False})


def test_prepare_devices_undo_that_fails_keeps_the_modes_to_put_back_on_the_saved_record(
    kinds: MockType, release: MockType, store: MockType
) -> None:
    rec = record(device("gpu-3b", A30), device("gpu-d8", A30_B))
    data = checkpoint(rec)
    a = started_attempt(rec, data)
    assert a.work is not None
    a.work.mig_mode_changed(A30_B, found=True)
    a.work.mig_mode_changed(A30, found=False)
    stuck = OSError(16, "Device or resource busy")
    release.release_devices.side_effect = stuck
    saved = saved_states(store)

    with pytest.raises(OSError, match="busy") as raised:
        PrepareDevices(kinds=kinds, release=release, store=store).undo(a)

    assert raised.value is stuck
    assert recorded_mig_modes(rec) == {A30: False, A30_B: True}
    assert [s["claims"][UID]["foundMigModes"] for s in saved] == [{A30: False, A30_B: True}]


def test_prepare_devices_undo_that_fails_saves_the_kept_record_as_started(
    kinds: MockType, release: MockType, store: MockType
) -> None:
    """record-completed's save may have reached the disk before it failed: the kept record is saved
    again, started (record-completed's undo ran first), so the file never says it was prepared."""
    rec = record(device())
    rec.state = PreparePhase.PREPARE_STARTED
    a = started_attempt(rec, checkpoint(rec))
    release.release_devices.side_effect = OSError(16, "Device or resource busy")
    saved: list[PreparePhase] = []
    store.save.side_effect = lambda data: saved.append(data.claims[rec.uid].state)

    with pytest.raises(OSError, match="busy"):
        PrepareDevices(kinds=kinds, release=release, store=store).undo(a)

    assert saved == [PreparePhase.PREPARE_STARTED]
    assert recorded_mig_modes(rec) == {}


def test_prepare_devices_undo_reports_the_release_failure_when_saving_fails_too(
    kinds: MockType, release: MockType, store: MockType
) -> None:
    rec = record(device())
    a = started_attempt(rec, checkpoint(rec))
    release.release_devices.side_effect = OSError(16, "Device or resource busy")
    store.save.side_effect = OSError(28, "No space left on device")

    with pytest.raises(OSError, match="busy"):
        PrepareDevices(kinds=kinds, release=release, store=store).undo(a)


def test_prepare_devices_undo_without_a_record_releases_nothing(
    kinds: MockType, release: MockType, store: MockType
) -> None:
    """record-started never saved one: nothing of this attempt is on the node."""
    PrepareDevices(kinds=kinds, release=release, store=store).undo(attempt())

    release.release_devices.assert_not_called()


# -- write-cdi-spec ---------------------------------------------------------------------------------


def test_write_cdi_spec_writes_the_claims_spec_and_keeps_each_devices_id(cdi: MockType) -> None:
    written = {"gpu-3b": edits("/dev/a"), "gpu-d8-ts-s-1": edits("/dev/b")}
    cdi.write.return_value = ["id-a", "id-b"]
    a = attempt(edits=dict(written))

    assert WriteCdiSpec(cdi).take(a) is DONE

    cdi.write.assert_called_once_with(UID, written)
    assert a.cdi_ids == {"gpu-3b": "id-a", "gpu-d8-ts-s-1": "id-b"}


def test_write_cdi_spec_lets_a_failed_write_fail_the_step(cdi: MockType) -> None:
    cdi.write.side_effect = OSError(28, "No space left on device")
    a = attempt(edits={"gpu-3b": edits("/dev/a")})

    with pytest.raises(OSError, match="No space left"):
        WriteCdiSpec(cdi).take(a)

    assert a.cdi_ids == {}


def test_write_cdi_spec_undo_removes_the_claims_spec(cdi: MockType) -> None:
    WriteCdiSpec(cdi).undo(attempt())

    cdi.remove.assert_called_once_with(UID)


# -- record-completed -------------------------------------------------------------------------------


def test_record_completed_records_each_devices_ids_and_the_claim_completed_durably(
    kinds: MockType, store: MockType
) -> None:
    mig = device("gpu-3b-mig-14-3", A30, requests=["gpu"])
    vm = device("gpu-d8", A30_B, share_id="s-1", requests=["vm"])
    rec = record(mig, vm)
    data = checkpoint(rec)
    a = started_attempt(rec, data, cdi_ids={"gpu-3b-mig-14-3": "id-mig", "gpu-d8-s-1": "id-vm"})
    a.driver_ids = {"gpu-3b-mig-14-3": (DRIVER_ID,)}  # the base spec only for a container's device
    saved = saved_states(store)

    assert RecordCompleted(store=store).take(a) is DONE

    assert (mig.cdi_device_ids, vm.cdi_device_ids) == (["id-mig", DRIVER_ID], ["id-vm"])
    assert rec.state is PreparePhase.PREPARE_COMPLETED
    assert rec.updated > T0
    assert [s["claims"][UID]["state"] for s in saved] == ["PrepareCompleted"]
    assert a.answer == answer_of(rec)
    assert a.answer is not None
    assert [d.cdi_device_ids for d in a.answer.devices] == [("id-mig", DRIVER_ID), ("id-vm",)]


def test_record_completed_of_a_claim_without_driver_files_records_the_claims_ids_only(
    kinds: MockType, store: MockType
) -> None:
    """A VM's claim: driver-files did not apply, so there is no base spec to name."""
    rec = record(device("gpu-3b"))
    a = started_attempt(rec, checkpoint(rec), cdi_ids={"gpu-3b": "id-a"})

    RecordCompleted(store=store).take(a)

    assert rec.devices[0].cdi_device_ids == ["id-a"]


def test_record_completed_that_could_not_save_gives_no_answer(kinds: MockType, store: MockType) -> None:
    rec = record(device("gpu-3b"))
    a = started_attempt(rec, checkpoint(rec), cdi_ids={"gpu-3b": "id-a"})
    kinds.in_container.return_value = False
    store.save.side_effect = OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output"):
        RecordCompleted(store=store).take(a)

    assert a.answer is None


def test_record_completed_undo_makes_the_record_started_again_without_saving(
    kinds: MockType, store: MockType
) -> None:
    """Whatever is saved next (a release that keeps the record) must not say the claim is prepared."""
    rec = record(device(), state=PreparePhase.PREPARE_COMPLETED)

    RecordCompleted(store=store).undo(started_attempt(rec, checkpoint(rec)))

    assert rec.state is PreparePhase.PREPARE_STARTED
    store.save.assert_not_called()


def test_record_completed_undo_without_a_record_does_nothing(kinds: MockType, store: MockType) -> None:
    other = record(uid=OTHER_UID, name="other", state=PreparePhase.PREPARE_COMPLETED)

    RecordCompleted(store=store).undo(attempt(checkpoint(other)))

    assert other.state is PreparePhase.PREPARE_COMPLETED
    assert store.mock_calls == []


# -- the module's functions -------------------------------------------------------------------------


def test_record_started_records_a_copy_of_the_planned_devices_started_now() -> None:
    """The plan's devices stay the plan's: the kinds complete the record's copies."""
    before = datetime.now(UTC)
    the_plan = planned(device("gpu-3b"), device("gpu-d8", A30_B, share_id="s-1"))

    rec = record_started(the_plan)

    assert (rec.uid, rec.namespace, rec.name) == (UID, "team", "train")
    assert rec.state is PreparePhase.PREPARE_STARTED
    assert rec.devices == list(the_plan.devices)
    assert all(r is not p for r, p in zip(rec.devices, the_plan.devices, strict=True))
    rec.devices[0].requests.append("changed")
    assert the_plan.devices[0].requests == ["gpu"]  # a deep copy
    assert before <= rec.updated <= datetime.now(UTC)


def test_answer_of_tells_the_kubelet_each_device_with_its_ids_requests_and_share() -> None:
    rec = record(
        device("gpu-3b", cdi_ids=["id-a", DRIVER_ID], requests=["gpu", "gpu/mig"]),
        device("gpu-d8-ts", A30_B, share_id="s-1", cdi_ids=["id-b"]),
    )

    assert answer_of(rec) == PrepareOutcome(
        devices=(
            PreparedDevice(
                pool=POOL, device="gpu-3b", cdi_device_ids=("id-a", DRIVER_ID), requests=("gpu", "gpu/mig")
            ),
            PreparedDevice(
                pool=POOL, device="gpu-d8-ts", cdi_device_ids=("id-b",), requests=("gpu",), share_id="s-1"
            ),
        )
    )


def test_cdi_key_is_the_device_name_and_for_a_share_its_share_id_too() -> None:
    assert cdi_key(device("gpu-3b")) == "gpu-3b"
    assert cdi_key(device("gpu-3b-ts", share_id="5f2b")) == "gpu-3b-ts-5f2b"


def test_forget_removes_the_claims_record_and_saves_the_rest(store: MockType) -> None:
    other = record(uid=OTHER_UID, name="other")
    data = checkpoint(record(), other)
    saved = saved_states(store)

    forget(store, data, UID)

    assert data.claims == {OTHER_UID: other}
    assert [list(s["claims"]) for s in saved] == [[OTHER_UID]]


def test_forget_of_a_claim_already_forgotten_still_saves(store: MockType) -> None:
    """Idempotent: a retry after a save that failed saves again."""
    data = checkpoint()

    forget(store, data, UID)

    store.save.assert_called_once_with(data)


# -- the composition root ---------------------------------------------------------------------------


def test_the_composition_root_declares_prepare_and_unprepare_in_the_documented_order() -> None:
    assert PREPARE_POINTS == (
        "load-checkpoint",
        "recorded-answer",
        "plan",
        "refuse-double-allocation",
        "driver-files",
        "record-started",
        "prepare-devices",
        "write-cdi-spec",
        "record-completed",
    )
    assert UNPREPARE_POINTS == ("load-checkpoint", "nothing-to-unprepare", "release-claim", "forget-claim")
    assert [p.cls for p in PreparationContainer.prepare_steps.args] == [
        LoadCheckpoint,
        RecordedAnswer,
        PlanDevices,
        RefuseDoubleAllocation,
        DriverFiles,
        RecordStarted,
        PrepareDevices,
        WriteCdiSpec,
        RecordCompleted,
    ]
    assert [p.cls for p in PreparationContainer.unprepare_steps.args] == [
        LoadCheckpoint,
        NothingToUnprepare,
        ReleaseClaim,
        ForgetClaim,
    ]


# -- start-up's release of a left-behind record -----------------------------------------------------


class Recording:
    """A step whose undo journals what it was given, may mark a card changed, and may raise."""

    def __init__(
        self,
        name: str,
        journal: list[str],
        *,
        changes: str | None = None,
        fails: Exception | None = None,
    ) -> None:
        self.name = name
        self.journal = journal
        self.changes = changes
        self.fails = fails
        self.seen: list[ClaimAttempt] = []

    def take(self, context: ClaimAttempt) -> StepOutcome:
        raise AssertionError("a release takes nothing")

    def undo(self, context: ClaimAttempt) -> None:
        self.journal.append(f"undo:{self.name}")
        self.seen.append(context)
        if self.changes is not None:
            context.changed_cards.add(self.changes)
        if self.fails is not None:
            raise self.fails


def test_record_release_undoes_every_step_newest_first_and_returns_the_changed_cards() -> None:
    journal: list[str] = []
    first = Recording("first", journal, changes=A30_B)
    middle = Recording("middle", journal)
    last = Recording("last", journal, changes=A30)
    rec = record(device(), state=PreparePhase.PREPARE_COMPLETED)
    data = checkpoint(rec)

    changed = RecordRelease(Pipeline("prepare", [first, middle, last]))(rec, data)

    assert journal == ["undo:last", "undo:middle", "undo:first"]
    assert changed == {A30, A30_B}
    [a] = first.seen
    assert middle.seen == last.seen == [a]  # one attempt for every undo
    assert (a.claim, a.checkpoint, a.record) == (ClaimRef(namespace="team", name="train", uid=UID), data, rec)
    assert a.work is not None
    assert (a.work.record, a.work.checkpoint, a.work.found_mig_modes) == (rec, data, {})
    assert a.work.changed_cards is a.changed_cards


def test_record_release_raises_what_the_first_failing_undo_raised_and_stops_there() -> None:
    """What the stuck step and the ones before it hold stays: the record is kept for a later round."""
    journal: list[str] = []
    stuck = OSError(16, "Device or resource busy")
    later_failure = OSError(5, "never reached")
    steps = [
        Recording("first", journal, fails=later_failure),
        Recording("stuck", journal, fails=stuck),
        Recording("last", journal, changes=A30),
    ]
    rec = record(device())

    with pytest.raises(OSError, match="busy") as raised:
        RecordRelease(Pipeline("prepare", steps))(rec, checkpoint(rec))

    assert raised.value is stuck
    assert journal == ["undo:last", "undo:stuck"]


def test_record_release_through_prepares_undos_releases_the_devices_then_forgets_the_record(
    kinds: MockType, release: MockType, store: MockType, cdi: MockType, listener: MockType
) -> None:
    """The real undos of a completed record: no attempt found MIG modes, so the kept record's are put back."""
    rec = record(device(), state=PreparePhase.PREPARE_COMPLETED)
    other = record(uid=OTHER_UID, name="other")
    data = checkpoint(rec, other)
    release.release_devices.return_value = {A30}
    saved = saved_states(store)
    steps: list[Step[ClaimAttempt]] = [
        RecordStarted(store=store, listener=listener),
        PrepareDevices(kinds=kinds, release=release, store=store),
        WriteCdiSpec(cdi),
        RecordCompleted(store=store),
    ]
    pipeline = Pipeline("prepare", steps)

    assert RecordRelease(pipeline)(rec, data) == {A30}

    release.release_devices.assert_called_once_with(rec, data, found_mig_modes=None)
    cdi.remove.assert_called_once_with(UID)
    assert list(data.claims) == [OTHER_UID]
    assert [list(s["claims"]) for s in saved] == [[OTHER_UID]]
    listener.assert_not_called()
