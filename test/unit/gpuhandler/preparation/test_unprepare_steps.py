"""Unprepare's steps one at a time: what each sets on the attempt, the outcome it returns, what it
asks of its services, and that no undo re-creates what was released.

Every collaborator is a ``create_autospec`` mock of its real class; the attempt, the checkpoint and
its records are real. The pipeline over a simulated node is :mod:`test_preparation_straight`'s.
"""

from __future__ import annotations

import pytest
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.preparation.step_values import (
    A30,
    A30_B,
    OTHER_UID,
    UID,
    attempt,
    checkpoint,
    device,
    record,
)

from pkg.framework.steptaker import StepOutcome
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointStore,
    ClaimRecord,
    PreparePhase,
)
from pkg.gpuhandler.preparation.release import ClaimRelease
from pkg.gpuhandler.preparation.unprepare_steps import ForgetClaim, NothingToUnprepare, ReleaseClaim

DONE, NOT_APPLICABLE, STOP = StepOutcome.DONE, StepOutcome.NOT_APPLICABLE, StepOutcome.STOP


def completed(
    uid: str = UID, *, name: str = "train", state: PreparePhase = PreparePhase.PREPARE_COMPLETED
) -> ClaimRecord:
    """A claim's record with one MIG device, prepared unless ``state`` says otherwise."""
    return record(device(), uid=uid, name=name, state=state)


@pytest.fixture
def cdi(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(CdiSpecs, instance=True)


@pytest.fixture
def release(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(ClaimRelease, instance=True)


@pytest.fixture
def store(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(CheckpointStore, instance=True)


# -- nothing-to-unprepare ---------------------------------------------------------------------------


def test_nothing_to_unprepare_stops_a_claim_without_a_record_and_removes_its_leftover_cdi_spec(
    cdi: MockType,
) -> None:
    """The kubelet calls Unprepare again after any doubt: a claim never prepared here, or forgotten."""
    a = attempt(checkpoint(completed(OTHER_UID, name="other")))

    assert NothingToUnprepare(cdi).take(a) is STOP

    cdi.remove.assert_called_once_with(UID)
    assert (a.record, a.note) == (None, "not prepared on this node")


@pytest.mark.parametrize("state", list(PreparePhase))
def test_nothing_to_unprepare_does_not_apply_to_a_recorded_claim_which_it_hands_on(
    cdi: MockType, state: PreparePhase
) -> None:
    """A prepare that only started is released as a completed one is: its record owns what it made."""
    rec = completed(state=state)
    a = attempt(checkpoint(rec, completed(OTHER_UID, name="other")))

    assert NothingToUnprepare(cdi).take(a) is NOT_APPLICABLE

    assert a.record is rec
    assert a.note == "done"
    assert cdi.mock_calls == []


def test_nothing_to_unprepare_lets_a_spec_it_cannot_remove_fail_the_call(cdi: MockType) -> None:
    cdi.remove.side_effect = IsADirectoryError(21, "Is a directory")

    with pytest.raises(IsADirectoryError):
        NothingToUnprepare(cdi).take(attempt(checkpoint()))


def test_nothing_to_unprepare_undo_puts_no_spec_back(cdi: MockType) -> None:
    NothingToUnprepare(cdi).undo(attempt(checkpoint()))

    assert cdi.mock_calls == []


# -- release-claim ----------------------------------------------------------------------------------


def test_release_claim_releases_the_record_among_the_others_and_adds_the_changed_cards(
    release: MockType,
) -> None:
    rec = completed()
    data = checkpoint(rec, completed(OTHER_UID, name="other"))
    a = attempt(data, record=rec, changed_cards={A30_B})
    release.release.return_value = {A30}

    assert ReleaseClaim(release).take(a) is DONE

    release.release.assert_called_once_with(rec, data)
    assert a.changed_cards == {A30, A30_B}
    assert UID in data.claims  # forget-claim's job, after the release


def test_release_claim_lets_a_failed_release_fail_the_call_and_keeps_the_record(release: MockType) -> None:
    rec = completed()
    data = checkpoint(rec)
    a = attempt(data, record=rec)
    release.release.side_effect = OSError(16, "Device or resource busy")

    with pytest.raises(OSError, match="busy"):
        ReleaseClaim(release).take(a)

    assert a.changed_cards == set()
    assert data.claims == {UID: rec}


def test_release_claim_undo_recreates_nothing(release: MockType) -> None:
    """Undoing a release would give the workload back what it no longer uses."""
    rec = completed()
    ReleaseClaim(release).undo(attempt(checkpoint(rec), record=rec))

    assert release.mock_calls == []


# -- forget-claim -----------------------------------------------------------------------------------


def test_forget_claim_removes_the_record_durably_and_keeps_the_others(store: MockType) -> None:
    other = completed(OTHER_UID, name="other")
    data = checkpoint(completed(), other)
    saved: list[list[str]] = []
    store.save.side_effect = lambda d: saved.append(list(d.claims))

    assert ForgetClaim(store).take(attempt(data)) is DONE

    assert data.claims == {OTHER_UID: other}
    assert saved == [[OTHER_UID]]


def test_forget_claim_lets_a_failed_save_fail_the_call(store: MockType) -> None:
    """The record stays on disk: the kubelet's retry releases (idempotently) and forgets again."""
    store.save.side_effect = OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        ForgetClaim(store).take(attempt(checkpoint(completed())))


def test_forget_claim_undo_remembers_nothing(store: MockType) -> None:
    data = checkpoint()
    ForgetClaim(store).undo(attempt(data))

    assert store.mock_calls == []
    assert data.claims == {}
