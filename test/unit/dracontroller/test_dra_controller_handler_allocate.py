"""gpu-dra-controller's allocate handler alone: the last step for an unallocated claim. It asks the
decisions service to allocate and write, then acts on the answer: an ``Allocated`` Event for an
allocation written (and a quick requeue when the Pod check after the write is still pending); an
``AllocationFailed`` Warning explaining the attempt that failed, requeued unless the failure is
fatal; a hand-over to the scheduler when a Pod turned out to reference the claim; a stop when the
claim went away; a write conflict counted and passed on.

The snapshot is built by the reconciler's own ``state_factory``; the decisions service, the event
recorder, the handover and the cache reader are autospecced. The allocator is the real one: the
handler only asks it to explain the attempt the decision carries (pure computation, no I/O), and
the attempts are real ones over an A30's slices.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1AllocationResult
from pytest_mock import MockerFixture, MockType
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact
from testutil.unit.dracontroller.dra_controller_handler_values import MIG_1G, races, snapshot_of

from pkg.domain.metrics import registry
from pkg.dra.allocator import AllocationAttempt, AllocationInputs, Allocator
from pkg.dra.model import Unschedulable
from pkg.dracontroller.internal.handler.allocate import AllocateHandler
from pkg.dracontroller.internal.service import AllocationDecision, Decisions, FoundBy, Handover
from pkg.dracontroller.internal.service.claim_writer import planned
from pkg.framework.client import ConflictError, NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import ConflictRequeue, StopHandlerChain
from pkg.framework.reconcile.contract import Result

ALLOCATOR = Allocator(share_id=lambda: "share-1")
INPUTS = AllocationInputs.of(slices=a30_pool(), classes=[MIG_1G], allocated_claims=[])


@pytest.fixture
def decisions(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Decisions, instance=True)


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(EventRecorderLogger, instance=True)


@pytest.fixture
def handover(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Handover, instance=True)


@pytest.fixture
def handler(decisions: MockType, recorder: MockType, handover: MockType) -> AllocateHandler:
    return AllocateHandler(decisions=decisions, recorder=recorder, allocator=ALLOCATOR, handover=handover)


def attempt(c: ResourceV1ResourceClaim) -> AllocationAttempt:
    """The real allocator's attempt for ``c`` on one A30 with nothing allocated yet."""
    return ALLOCATOR.attempt(c, INPUTS)


def allocation(a: AllocationAttempt) -> V1AllocationResult:
    assert isinstance(a.outcome, V1AllocationResult), a.outcome
    return a.outcome


def failures(reason: str) -> float:
    return registry.get_sample_value("gpu_dra_allocation_failures_total", {"reason": reason}) or 0.0


def allocations_timed() -> float:
    return registry.get_sample_value("gpu_dra_allocation_latency_seconds_count") or 0.0


def test_an_allocated_claim_is_left_alone(
    mocker: MockerFixture, handler: AllocateHandler, decisions: MockType, recorder: MockType
) -> None:
    c = claim("train", exact("gpu", "mig-1g"))
    written = planned(c, allocation(attempt(c)))

    assert handler.handle(snapshot_of(mocker, written)) is None

    decisions.allocate.assert_not_called()
    recorder.event.assert_not_called()


def test_an_allocation_written_is_announced_with_its_devices_and_node(
    mocker: MockerFixture,
    handler: AllocateHandler,
    decisions: MockType,
    recorder: MockType,
    handover: MockType,
) -> None:
    c = claim("train", exact("gpu", "mig-1g"), namespace="team")
    a = attempt(c)
    written = planned(c, allocation(a))
    decisions.allocate.return_value = AllocationDecision(a, written=written)
    timed = allocations_timed()

    assert handler.handle(snapshot_of(mocker, c)) is None

    decisions.allocate.assert_called_once_with(c, namespace="team")
    recorder.event.assert_called_once_with(
        written,
        type_="Normal",
        reason="Allocated",
        message="allocated gpu -> gpu.deckhouse.io/gpus-node-a-gpu-0000-02-00-0/gpu-0000-02-00-0-mig-1g-0 "
        "on node node-a",
        kind=RESOURCE_CLAIM,
    )
    handover.left_to_scheduler.assert_not_called()
    assert allocations_timed() == timed + 1


def test_an_allocation_whose_pod_check_is_pending_comes_back_soon(
    mocker: MockerFixture, handler: AllocateHandler, decisions: MockType, recorder: MockType
) -> None:
    c = claim("train", exact("gpu", "mig-1g"))
    a = attempt(c)
    written = planned(c, allocation(a))
    decisions.allocate.return_value = AllocationDecision(a, written=written, check_pending=True)

    assert handler.handle(snapshot_of(mocker, c)) == Result(requeue_after=timedelta(seconds=0.05))

    recorder.event.assert_called_once()
    assert recorder.event.call_args.args == (written,)


def test_a_claim_deleted_before_the_write_stops_the_chain_quietly(
    mocker: MockerFixture,
    handler: AllocateHandler,
    decisions: MockType,
    recorder: MockType,
    handover: MockType,
) -> None:
    c = claim("train", exact("gpu", "mig-1g"))
    decisions.allocate.return_value = AllocationDecision(attempt(c), written=None)
    timed = allocations_timed()

    with pytest.raises(StopHandlerChain, match="deleted") as stop:
        handler.handle(snapshot_of(mocker, c))

    assert stop.value.result is None
    recorder.event.assert_not_called()
    handover.left_to_scheduler.assert_not_called()
    assert allocations_timed() == timed


@pytest.mark.parametrize(
    ("given_back", "found"),
    [(False, FoundBy.READ_BEFORE_WRITE), (True, FoundBy.READ_AFTER_WRITE)],
    ids=["before-the-write", "after-the-write"],
)
def test_a_pod_found_referencing_the_claim_hands_it_over_and_stops(
    mocker: MockerFixture,
    handler: AllocateHandler,
    decisions: MockType,
    recorder: MockType,
    handover: MockType,
    given_back: bool,
    found: FoundBy,
) -> None:
    c = claim("train", exact("gpu", "mig-1g"))
    decisions.allocate.return_value = AllocationDecision(
        attempt(c), referenced_by=("default/web",), given_back=given_back
    )
    before = {when: races(when) for when in FoundBy if when is not FoundBy.CACHE}

    with pytest.raises(
        StopHandlerChain, match=f"referenced by pod default/web \\({found.value} read\\)"
    ) as stop:
        handler.handle(snapshot_of(mocker, c))

    assert stop.value.result is None  # the Pod's arrival in the cache wakes the claim
    handover.left_to_scheduler.assert_called_once_with(c, ("default/web",), found=found)
    recorder.event.assert_not_called()
    assert {when: races(when) - count for when, count in before.items()} == {
        when: 1.0 if when is found else 0.0 for when in before
    }


def test_no_capacity_is_explained_in_a_warning_and_retried(
    mocker: MockerFixture,
    handler: AllocateHandler,
    decisions: MockType,
    recorder: MockType,
    handover: MockType,
) -> None:
    c = claim("train", exact("gpu", "mig-1g", count=5))  # an A30 has four 1g slices
    a = attempt(c)
    assert isinstance(a.outcome, Unschedulable)
    assert not a.outcome.fatal
    decisions.allocate.return_value = AllocationDecision(a)
    before = failures("unschedulable")

    assert handler.handle(snapshot_of(mocker, c)) == Result(requeue=True)

    recorder.event.assert_called_once()
    [claim_told] = recorder.event.call_args.args
    told = recorder.event.call_args.kwargs
    assert claim_told is c
    assert (told["type_"], told["reason"], told["kind"]) == ("Warning", "AllocationFailed", RESOURCE_CLAIM)
    # the cause first, in the user's words, then the outcome and the devices of the attempt taken
    assert told["message"].startswith("request gpu: 5 MIG 1g devices asked, 4 match in the cluster; ")
    assert "; cannot allocate all claims; request gpu: 8 devices" in told["message"]
    assert "4 fits" in told["message"]
    handover.left_to_scheduler.assert_not_called()
    assert failures("unschedulable") == before + 1


def test_a_broken_claim_is_explained_and_not_retried(
    mocker: MockerFixture, handler: AllocateHandler, decisions: MockType, recorder: MockType
) -> None:
    c = claim("train", exact("gpu", "missing"))
    a = attempt(c)
    assert isinstance(a.outcome, Unschedulable)
    assert a.outcome.fatal
    decisions.allocate.return_value = AllocationDecision(a)
    before = failures("invalid")

    assert handler.handle(snapshot_of(mocker, c)) is None

    recorder.event.assert_called_once()
    told = recorder.event.call_args.kwargs
    assert told["reason"] == "AllocationFailed"
    assert "device class missing not found" in told["message"]
    assert failures("invalid") == before + 1


def test_a_write_conflict_is_counted_and_passed_on_without_an_event(
    mocker: MockerFixture, handler: AllocateHandler, decisions: MockType, recorder: MockType
) -> None:
    c = claim("train", exact("gpu", "mig-1g"))
    conflict = ConflictRequeue(
        key="default/train",
        write="status",
        cause=ConflictError(status=409, reason="Conflict", message="the object has been modified"),
    )
    decisions.allocate.side_effect = conflict
    before = failures("conflict")

    with pytest.raises(ConflictRequeue) as raised:
        handler.handle(snapshot_of(mocker, c))

    assert raised.value is conflict
    recorder.event.assert_not_called()
    assert failures("conflict") == before + 1


def test_another_write_error_propagates_uncounted_and_unannounced(
    mocker: MockerFixture, handler: AllocateHandler, decisions: MockType, recorder: MockType
) -> None:
    decisions.allocate.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")
    before = failures("conflict")

    with pytest.raises(NotFoundError):
        handler.handle(snapshot_of(mocker, claim("train", exact("gpu", "mig-1g"))))

    recorder.event.assert_not_called()
    assert failures("conflict") == before
