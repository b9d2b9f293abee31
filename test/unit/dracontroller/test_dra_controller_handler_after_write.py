"""gpu-dra-controller's after-write handler alone: for a claim we allocated, it finishes the check
"does a Pod reference this claim" that the allocation left pending until the Pod cache reached the
version written. Still pending: the chain stops and the claim comes back after the service's
backoff. Done and a Pod found: the allocation was given back, the race is counted, the claim is
handed over to the scheduler and the chain stops. Done and no Pod: on to the collision check.

The snapshot is built by the reconciler's own ``state_factory``; the decisions service, the
handover and the cache reader are autospecced.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from pytest_mock import MockerFixture, MockType
from testutil.unit.dra.allocator.alloc_builders import claim, exact
from testutil.unit.dracontroller.dra_controller_handler_values import ours, races, snapshot_of

from pkg.dracontroller.internal.handler.after_write import AfterWriteHandler
from pkg.dracontroller.internal.service import AfterWrite, Decisions, FoundBy, Handover
from pkg.framework.client import ConflictError
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result


@pytest.fixture
def decisions(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Decisions, instance=True)


@pytest.fixture
def handover(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Handover, instance=True)


@pytest.fixture
def handler(decisions: MockType, handover: MockType) -> AfterWriteHandler:
    return AfterWriteHandler(decisions=decisions, handover=handover)


def test_an_unallocated_claim_is_not_checked(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    assert handler.handle(snapshot_of(mocker, claim("train", exact("gpu", "mig-1g")))) is None

    decisions.check_after_write.assert_not_called()
    handover.left_to_scheduler.assert_not_called()


@pytest.mark.parametrize("reserved", [False, True], ids=["unreserved", "reserved"])
def test_the_check_is_asked_for_the_cached_claim_and_whether_a_pod_reserves_it(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, reserved: bool
) -> None:
    decisions.check_after_write.return_value = None
    snapshot = snapshot_of(mocker, ours(reserved=reserved))

    handler.handle(snapshot)

    decisions.check_after_write.assert_called_once_with(snapshot.claim, reserved=reserved)


def test_a_claim_without_a_pending_check_goes_on_to_the_collision_check(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    decisions.check_after_write.return_value = None

    assert handler.handle(snapshot_of(mocker, ours())) is None

    handover.left_to_scheduler.assert_not_called()


def test_a_check_done_without_a_pod_goes_on_to_the_collision_check(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    decisions.check_after_write.return_value = AfterWrite()
    before = races("after-write")

    assert handler.handle(snapshot_of(mocker, ours())) is None

    handover.left_to_scheduler.assert_not_called()
    assert races("after-write") == before


def test_a_check_still_pending_stops_the_chain_and_comes_back_after_the_backoff(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    decisions.check_after_write.return_value = AfterWrite(retry_in=0.4)
    before = races("after-write")

    with pytest.raises(StopHandlerChain) as stop:
        handler.handle(snapshot_of(mocker, ours()))

    assert stop.value.result == Result(requeue_after=timedelta(seconds=0.4))
    assert "Pod cache" in stop.value.reason
    handover.left_to_scheduler.assert_not_called()
    assert races("after-write") == before


def test_a_pod_found_after_the_write_hands_the_released_claim_over_and_stops(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    snapshot = snapshot_of(mocker, ours())
    released = claim("train", exact("gpu", "mig-1g"))  # as written without its allocation
    decisions.check_after_write.return_value = AfterWrite(
        referenced_by=("default/web", "default/batch"), given_back=True, released=released
    )
    before = {when: races(when) for when in ("before-write", "after-write")}

    with pytest.raises(
        StopHandlerChain, match=r"referenced by pod default/web \(after-write check\)"
    ) as stop:
        handler.handle(snapshot)

    assert stop.value.result is None  # the Pod's arrival in the cache wakes the claim
    handover.left_to_scheduler.assert_called_once_with(
        released, ("default/web", "default/batch"), found=FoundBy.READ_AFTER_WRITE
    )
    assert races("after-write") == before["after-write"] + 1
    assert races("before-write") == before["before-write"]


def test_a_pod_found_when_the_claim_is_gone_hands_over_the_cached_claim(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    snapshot = snapshot_of(mocker, ours())
    decisions.check_after_write.return_value = AfterWrite(
        referenced_by=("default/web",), given_back=True, released=None
    )

    with pytest.raises(StopHandlerChain):
        handler.handle(snapshot)

    handover.left_to_scheduler.assert_called_once_with(
        snapshot.claim, ("default/web",), found=FoundBy.READ_AFTER_WRITE
    )


def test_a_failed_check_propagates_without_a_handover(
    mocker: MockerFixture, handler: AfterWriteHandler, decisions: MockType, handover: MockType
) -> None:
    decisions.check_after_write.side_effect = ConflictError(status=409, reason="Conflict", message="modified")
    before = races("after-write")

    with pytest.raises(ConflictError):
        handler.handle(snapshot_of(mocker, ours()))

    handover.left_to_scheduler.assert_not_called()
    assert races("after-write") == before
