"""gpu-dra-controller's eligibility handler alone: the first step, which lets through only a claim
that is ours to allocate (unallocated and eligible) or ours to watch over (allocated by us), stops
the chain for every other claim, clears our stale allocated-by mark from a claim that is not ours
to allocate, and tells the user once that a claim a Pod references is left to the scheduler.

The snapshot is built by the reconciler's own ``state_factory`` over an autospecced cache reader;
the claim writer and the handover are autospecced too.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
)
from pytest_mock import MockerFixture, MockType
from testutil.k8s_fields import meta
from testutil.unit.dra.allocator.alloc_builders import claim, exact
from testutil.unit.dracontroller.dra_controller_handler_values import allocated_claim, snapshot_of

from pkg.dracontroller.internal.handler.eligibility import EligibilityHandler
from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US
from pkg.dracontroller.internal.service import ClaimWriter, FoundBy, Handover
from pkg.framework.client import ConflictError
from pkg.framework.reconcile import StopHandlerChain


@pytest.fixture
def writer(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(ClaimWriter, instance=True)


@pytest.fixture
def handover(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Handover, instance=True)


@pytest.fixture
def handler(writer: MockType, handover: MockType) -> EligibilityHandler:
    return EligibilityHandler(writer=writer, handover=handover)


def pending(cls: str = "mig-1g", *, marked: bool = False) -> ResourceV1ResourceClaim:
    c = claim("train", exact("gpu", cls))
    if marked:
        meta(c).annotations = {ALLOCATED_BY: ALLOCATED_BY_US}
    return c


def allocated(*, ours: bool) -> ResourceV1ResourceClaim:
    return allocated_claim(marked=ours)


def test_an_eligible_unallocated_claim_goes_on_to_allocation_untouched(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    assert handler.handle(snapshot_of(mocker, pending())) is None

    writer.forget_mark.assert_not_called()
    handover.left_to_scheduler.assert_not_called()


def test_a_claim_we_allocated_goes_on_to_the_collision_check(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    # referenced by a Pod: eligibility rules are for allocating, not for watching over ours
    snapshot = snapshot_of(mocker, allocated(ours=True), pods=["default/web"])

    assert handler.handle(snapshot) is None

    writer.forget_mark.assert_not_called()
    handover.left_to_scheduler.assert_not_called()


def test_a_claim_allocated_by_someone_else_stops_the_chain(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    with pytest.raises(StopHandlerChain, match="allocated by someone else") as stop:
        handler.handle(snapshot_of(mocker, allocated(ours=False)))

    assert stop.value.result is None
    writer.forget_mark.assert_not_called()
    handover.left_to_scheduler.assert_not_called()


@pytest.mark.parametrize("is_allocated", [False, True], ids=["unallocated", "allocated"])
def test_a_claim_being_deleted_stops_the_chain_whoever_allocated_it(
    mocker: MockerFixture,
    handler: EligibilityHandler,
    writer: MockType,
    handover: MockType,
    is_allocated: bool,
) -> None:
    c = allocated(ours=True) if is_allocated else pending(marked=True)
    meta(c).deletion_timestamp = datetime(2026, 1, 1, tzinfo=UTC)

    with pytest.raises(StopHandlerChain, match="being deleted"):
        handler.handle(snapshot_of(mocker, c, pods=["default/web"]))

    writer.forget_mark.assert_not_called()  # its release is the kube-controller-manager's
    handover.left_to_scheduler.assert_not_called()


def test_an_ineligible_claim_stops_the_chain_with_the_verdicts_reason(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    snapshot = snapshot_of(mocker, pending("missing"))

    with pytest.raises(StopHandlerChain) as stop:
        handler.handle(snapshot)

    assert stop.value.reason == "device class 'missing' not found" == snapshot.verdict.reason
    assert stop.value.result is None
    writer.forget_mark.assert_not_called()
    handover.left_to_scheduler.assert_not_called()


def test_an_ineligible_claim_still_marked_as_ours_loses_the_mark(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    snapshot = snapshot_of(mocker, pending("missing", marked=True))

    with pytest.raises(StopHandlerChain, match="device class 'missing' not found"):
        handler.handle(snapshot)

    writer.forget_mark.assert_called_once_with(snapshot.claim)
    handover.left_to_scheduler.assert_not_called()


def test_a_claim_a_pod_references_is_handed_over_to_the_scheduler(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    snapshot = snapshot_of(mocker, pending(), pods=["default/web", "default/batch"])

    with pytest.raises(StopHandlerChain, match="referenced by pod default/batch"):
        handler.handle(snapshot)

    handover.left_to_scheduler.assert_called_once_with(
        snapshot.claim, ("default/batch", "default/web"), found=FoundBy.CACHE
    )
    writer.forget_mark.assert_not_called()


def test_a_marked_claim_a_pod_references_loses_the_mark_and_is_handed_over(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    snapshot = snapshot_of(mocker, pending(marked=True), pods=["default/web"])

    with pytest.raises(StopHandlerChain):
        handler.handle(snapshot)

    writer.forget_mark.assert_called_once_with(snapshot.claim)
    handover.left_to_scheduler.assert_called_once_with(snapshot.claim, ("default/web",), found=FoundBy.CACHE)


def test_a_failed_mark_removal_propagates_before_any_handover(
    mocker: MockerFixture, handler: EligibilityHandler, writer: MockType, handover: MockType
) -> None:
    writer.forget_mark.side_effect = ConflictError(status=409, reason="Conflict", message="modified")
    snapshot = snapshot_of(mocker, pending(marked=True), pods=["default/web"])

    with pytest.raises(ConflictError):
        handler.handle(snapshot)

    handover.left_to_scheduler.assert_not_called()
