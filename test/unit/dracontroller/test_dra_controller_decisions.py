"""The decision service alone, its collaborators mocked: what it reads and reserves under the
decision lock, what it checks and writes outside it (and in which order), when it gives an
allocation back, and how the deferred check waits, backs off and falls back to the API server.

Every collaborator reports to one recorder (``calls``), so a test can assert the exact sequence
around the lock: the lock's ``__enter__``/``__exit__`` are calls like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceClass,
    V1DeviceRequestAllocationResult,
    V1Node,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from pytest_mock import MockerFixture, MockType

from pkg.dra.allocator import AllocationAttempt, AllocationInputs, Allocator
from pkg.dra.model import Unschedulable
from pkg.dracontroller.internal.service.cache_reader import CacheReader
from pkg.dracontroller.internal.service.claim_writer import ClaimWriter, planned
from pkg.dracontroller.internal.service.decisions import (
    FIRST_RETRY_SECONDS,
    MAX_RETRY_SECONDS,
    AfterWrite,
    AfterWriteChecks,
    AllocationDecision,
    Decisions,
    Release,
)
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.dracontroller.internal.service.pod_references import PodReferences
from pkg.framework.client.errors import ApiError, ConflictError
from pkg.framework.reconcile import ConflictRequeue
from pkg.framework.reconcile.contract import Request

WAIT = 90.0


def claim(name: str = "c1", *, uid: str = "u1", version: str = "7") -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace="team-a", uid=uid, resource_version=version)
    )


CLAIM = claim()
WRITTEN = claim(version="9")
RELEASED = claim(version="10")
OTHER = claim("c2", uid="u2")
ALLOCATION = V1AllocationResult(
    devices=V1DeviceAllocationResult(
        results=[
            V1DeviceRequestAllocationResult(request="gpu", driver="gpu.deckhouse.io", pool="p", device="d")
        ]
    )
)
SLICE = V1ResourceSlice(
    metadata=V1ObjectMeta(name="node-a-gpu"),
    spec=V1ResourceSliceSpec(
        driver="gpu.deckhouse.io", pool=V1ResourcePool(name="p", generation=1, resource_slice_count=1)
    ),
)
CLASSES = {"gpu": V1DeviceClass(metadata=V1ObjectMeta(name="gpu"))}
LABELS = {"team": "a"}
INPUTS = AllocationInputs(
    slices=(SLICE,), classes=CLASSES, allocated_claims=(OTHER,), namespace_labels=LABELS
)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Parts:
    """The service and its mocked collaborators, all reporting to ``calls``."""

    calls: MockType
    reader: MockType
    lock: MockType
    in_flight: MockType
    allocator: MockType
    writer: MockType
    pods: MockType
    clock: Clock
    decisions: Decisions

    def decide(self, outcome: V1AllocationResult | Unschedulable) -> AllocationAttempt:
        attempt = AllocationAttempt(claim=CLAIM, inputs=INPUTS, outcome=outcome)
        self.allocator.attempt.return_value = attempt
        return attempt


@pytest.fixture
def parts(mocker: MockerFixture) -> Parts:
    calls: MockType = mocker.Mock()
    lock: MockType = mocker.MagicMock()
    in_flight: MockType = mocker.Mock(spec=InFlight)
    in_flight.lock = lock
    reader: MockType = mocker.Mock(spec=CacheReader)
    reader.in_flight = in_flight
    reader.slices.return_value = [SLICE]
    reader.classes.return_value = CLASSES
    reader.allocated_claims.return_value = [OTHER]
    reader.namespace_labels.return_value = LABELS
    allocator: MockType = mocker.Mock(spec=Allocator)
    writer: MockType = mocker.Mock(spec=ClaimWriter)
    writer.allocate.return_value = WRITTEN
    writer.release.return_value = RELEASED
    pods: MockType = mocker.Mock(spec=PodReferences)
    pods.referencing.return_value = []
    pods.referencing_if_current.return_value = []
    calls.attach_mock(lock, "lock")
    calls.attach_mock(in_flight.reserve, "reserve")
    calls.attach_mock(in_flight.settle, "settle")
    calls.attach_mock(allocator, "allocator")
    calls.attach_mock(writer, "writer")
    calls.attach_mock(pods, "pods")
    clock = Clock()
    decisions = Decisions(
        cache_reader=reader,
        writer=writer,
        allocator=allocator,
        pods=pods,
        after_write=AfterWriteChecks(clock=clock),
        after_write_wait=WAIT,
    )
    return Parts(calls, reader, lock, in_flight, allocator, writer, pods, clock, decisions)


ENTER, EXIT = "lock.__enter__", "lock.__exit__"


def names(parts: Parts) -> list[str]:
    """The recorded calls by name, in order."""
    return [name for name, _, _ in parts.calls.mock_calls]


# allocate: the decision under the lock, the reservation, the writes outside it


def test_an_unschedulable_claim_is_decided_under_the_lock_and_nothing_is_reserved_or_written(
    parts: Parts,
) -> None:
    attempt = parts.decide(Unschedulable("no GPU fits"))

    assert parts.decisions.allocate(CLAIM, namespace="team-a") == AllocationDecision(attempt)
    assert names(parts) == [ENTER, "allocator.attempt", EXIT]
    parts.allocator.attempt.assert_called_once_with(CLAIM, INPUTS)
    parts.reader.namespace_labels.assert_called_once_with("team-a")


def test_an_allocation_is_reserved_under_the_lock_checked_written_and_settled_outside_it(
    parts: Parts,
) -> None:
    attempt = parts.decide(ALLOCATION)

    decision = parts.decisions.allocate(CLAIM, namespace="team-a")

    assert decision == AllocationDecision(attempt, written=WRITTEN)
    assert names(parts) == [
        ENTER,
        "allocator.attempt",
        "reserve",
        EXIT,
        "pods.referencing",
        "writer.allocate",
        "settle",
        "pods.referencing_if_current",
    ]
    reservation = parts.in_flight.reserve.call_args.args[0]
    assert reservation == planned(CLAIM, ALLOCATION)
    parts.in_flight.settle.assert_called_once()
    assert parts.in_flight.settle.call_args.args[0] is reservation
    parts.pods.referencing.assert_called_once_with(CLAIM)
    parts.writer.allocate.assert_called_once_with(CLAIM, ALLOCATION)
    parts.pods.referencing_if_current.assert_called_once_with(WRITTEN)
    assert parts.decisions.pending_after_write() == 0


def test_a_pod_found_before_the_write_means_no_write_and_the_reservation_is_settled(parts: Parts) -> None:
    attempt = parts.decide(ALLOCATION)
    parts.pods.referencing.return_value = ["team-a/p1"]

    decision = parts.decisions.allocate(CLAIM, namespace="team-a")

    assert decision == AllocationDecision(attempt, referenced_by=("team-a/p1",))
    assert names(parts) == [ENTER, "allocator.attempt", "reserve", EXIT, "pods.referencing", "settle"]
    parts.writer.allocate.assert_not_called()
    parts.writer.release.assert_not_called()


def test_a_claim_gone_before_the_write_is_settled_and_not_checked_again(parts: Parts) -> None:
    attempt = parts.decide(ALLOCATION)
    parts.writer.allocate.return_value = None

    assert parts.decisions.allocate(CLAIM, namespace="team-a") == AllocationDecision(attempt)
    assert names(parts)[-2:] == ["writer.allocate", "settle"]
    parts.pods.referencing_if_current.assert_not_called()
    assert parts.decisions.pending_after_write() == 0


@pytest.mark.parametrize(
    "error",
    [
        ConflictRequeue(
            key="team-a/c1", write="status", cause=ConflictError(status=409, reason="Conflict", message="")
        ),
        ApiError(status=503, reason="ServiceUnavailable", message="down"),
    ],
    ids=["conflict", "api-down"],
)
def test_a_failed_write_frees_the_reservation_and_propagates(parts: Parts, error: Exception) -> None:
    parts.decide(ALLOCATION)
    parts.writer.allocate.side_effect = error

    with pytest.raises(type(error)) as raised:
        parts.decisions.allocate(CLAIM, namespace="team-a")

    assert raised.value is error
    assert names(parts)[-2:] == ["writer.allocate", "settle"]
    assert parts.in_flight.settle.call_args.args[0] is parts.in_flight.reserve.call_args.args[0]
    parts.pods.referencing_if_current.assert_not_called()


def test_a_failed_pod_check_frees_the_reservation_and_propagates(parts: Parts) -> None:
    parts.decide(ALLOCATION)
    parts.pods.referencing.side_effect = ApiError(status=500, reason="InternalError", message="x")

    with pytest.raises(ApiError):
        parts.decisions.allocate(CLAIM, namespace="team-a")

    assert names(parts)[-2:] == ["pods.referencing", "settle"]
    parts.writer.allocate.assert_not_called()


def test_an_allocator_error_releases_the_lock_and_reserves_nothing(parts: Parts) -> None:
    parts.allocator.attempt.side_effect = RuntimeError("boom")

    with pytest.raises(RuntimeError):
        parts.decisions.allocate(CLAIM, namespace="team-a")

    assert names(parts) == [ENTER, "allocator.attempt", EXIT]
    parts.in_flight.reserve.assert_not_called()


def test_a_pod_that_appears_during_the_write_makes_the_allocation_go_back_under_the_lock(
    parts: Parts,
) -> None:
    attempt = parts.decide(ALLOCATION)
    parts.pods.referencing_if_current.return_value = ["team-a/late"]

    decision = parts.decisions.allocate(CLAIM, namespace="team-a")

    assert decision == AllocationDecision(attempt, referenced_by=("team-a/late",), given_back=True)
    assert names(parts)[-4:] == ["pods.referencing_if_current", ENTER, "writer.release", EXIT]
    parts.writer.release.assert_called_once_with(WRITTEN)
    assert parts.decisions.pending_after_write() == 0


def test_a_pod_cache_behind_the_written_version_defers_the_check(parts: Parts) -> None:
    attempt = parts.decide(ALLOCATION)
    parts.pods.referencing_if_current.return_value = None

    decision = parts.decisions.allocate(CLAIM, namespace="team-a")

    assert decision == AllocationDecision(attempt, written=WRITTEN, check_pending=True)
    assert parts.decisions.pending_after_write() == 1
    parts.writer.release.assert_not_called()
    assert names(parts)[-1] == "pods.referencing_if_current"  # no wait, no API read under the lock


# check_after_write: the deferred check


def pending(parts: Parts) -> None:
    """Leaves WRITTEN with its check deferred, then forgets the calls that took."""
    parts.decide(ALLOCATION)
    parts.pods.referencing_if_current.return_value = None
    parts.decisions.allocate(CLAIM, namespace="team-a")
    parts.calls.reset_mock()


def test_no_check_is_made_for_a_claim_with_none_pending(parts: Parts) -> None:
    assert parts.decisions.check_after_write(CLAIM, reserved=False) is None
    assert parts.calls.mock_calls == []


def test_a_claim_recreated_under_the_same_name_has_no_check_pending(parts: Parts) -> None:
    pending(parts)

    assert parts.decisions.check_after_write(claim(uid="u-new"), reserved=False) is None
    assert parts.calls.mock_calls == []
    assert parts.decisions.pending_after_write() == 1


def test_a_reserved_claim_ends_the_check_without_reading_pods(parts: Parts) -> None:
    pending(parts)

    assert parts.decisions.check_after_write(WRITTEN, reserved=True) == AfterWrite()
    assert parts.calls.mock_calls == []
    assert parts.decisions.pending_after_write() == 0


def test_while_the_cache_is_behind_the_check_waits_with_a_doubling_backoff(parts: Parts) -> None:
    pending(parts)
    parts.clock.now += WAIT - 1

    delays = [parts.decisions.check_after_write(WRITTEN, reserved=False) for _ in range(8)]

    assert delays == [AfterWrite(retry_in=d) for d in (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0)]
    assert (FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS) == (0.05, 2.0)
    assert names(parts) == ["pods.referencing_if_current"] * 8
    parts.pods.referencing_if_current.assert_called_with(WRITTEN)
    parts.pods.referencing.assert_not_called()
    assert parts.decisions.pending_after_write() == 1


def test_past_the_wait_the_check_asks_the_api_server(parts: Parts) -> None:
    pending(parts)
    parts.clock.now += WAIT

    assert parts.decisions.check_after_write(WRITTEN, reserved=False) == AfterWrite()
    assert names(parts) == ["pods.referencing_if_current", "pods.referencing"]
    parts.pods.referencing.assert_called_once_with(WRITTEN)
    assert parts.decisions.pending_after_write() == 0


def test_a_pod_the_api_server_finds_past_the_wait_makes_the_allocation_go_back(parts: Parts) -> None:
    pending(parts)
    parts.clock.now += WAIT
    parts.pods.referencing.return_value = ["team-a/late"]

    result = parts.decisions.check_after_write(WRITTEN, reserved=False)

    assert result == AfterWrite(referenced_by=("team-a/late",), given_back=True, released=RELEASED)
    assert names(parts) == ["pods.referencing_if_current", "pods.referencing", ENTER, "writer.release", EXIT]
    parts.writer.release.assert_called_once_with(WRITTEN)
    assert parts.decisions.pending_after_write() == 0


def test_a_current_cache_without_pods_ends_the_check(parts: Parts) -> None:
    pending(parts)
    parts.pods.referencing_if_current.return_value = []

    assert parts.decisions.check_after_write(WRITTEN, reserved=False) == AfterWrite()
    assert names(parts) == ["pods.referencing_if_current"]
    assert parts.decisions.pending_after_write() == 0


def test_a_current_cache_with_a_pod_makes_the_allocation_go_back_under_the_lock(parts: Parts) -> None:
    pending(parts)
    parts.pods.referencing_if_current.return_value = ["team-a/late"]
    cached = claim(version="11")  # the claim as cached now: the release swaps against it

    result = parts.decisions.check_after_write(cached, reserved=False)

    assert result == AfterWrite(referenced_by=("team-a/late",), given_back=True, released=RELEASED)
    assert names(parts) == ["pods.referencing_if_current", ENTER, "writer.release", EXIT]
    parts.pods.referencing_if_current.assert_called_once_with(WRITTEN)
    parts.writer.release.assert_called_once_with(cached)
    assert parts.decisions.pending_after_write() == 0


def test_a_failed_release_keeps_the_check_pending_for_the_retry(parts: Parts) -> None:
    pending(parts)
    parts.pods.referencing_if_current.return_value = ["team-a/late"]
    parts.writer.release.side_effect = ConflictRequeue(
        key="team-a/c1", write="status", cause=ConflictError(status=409, reason="Conflict", message="")
    )

    with pytest.raises(ConflictRequeue):
        parts.decisions.check_after_write(WRITTEN, reserved=False)

    assert parts.decisions.pending_after_write() == 1
    assert names(parts)[-1] == EXIT


def test_the_pending_checks_are_bounded_oldest_forgotten_first() -> None:
    checks = AfterWriteChecks(capacity=2)
    first, second, third = claim("a", uid="a"), claim("b", uid="b"), claim("c", uid="c")

    assert [checks.add(c) for c in (first, second, third)] == [FIRST_RETRY_SECONDS] * 3

    assert len(checks) == 2
    assert checks.get(first) is None
    assert [entry.written for entry in (checks.get(second), checks.get(third)) if entry] == [second, third]


# release_if_colliding


def test_no_collision_means_no_release(parts: Parts, mocker: MockerFixture) -> None:
    check: MockType = mocker.Mock(return_value=None)
    parts.calls.attach_mock(check, "check")

    assert parts.decisions.release_if_colliding(CLAIM, check=check) is None
    assert names(parts) == [ENTER, "check", EXIT]
    check.assert_called_once_with(CLAIM, parts.reader)


def test_a_collision_gives_the_allocation_back_under_the_lock(parts: Parts, mocker: MockerFixture) -> None:
    check: MockType = mocker.Mock(return_value="device d is also allocated to team-a/c2")
    parts.calls.attach_mock(check, "check")

    result = parts.decisions.release_if_colliding(CLAIM, check=check)

    assert result == Release(reason="device d is also allocated to team-a/c2", released=RELEASED)
    assert names(parts) == [ENTER, "check", "writer.release", EXIT]
    parts.writer.release.assert_called_once_with(CLAIM)


def test_a_failed_release_of_a_collision_propagates_and_the_lock_is_released(
    parts: Parts, mocker: MockerFixture
) -> None:
    parts.writer.release.side_effect = ApiError(status=503, reason="ServiceUnavailable", message="down")

    with pytest.raises(ApiError):
        parts.decisions.release_if_colliding(CLAIM, check=mocker.Mock(return_value="collision"))

    assert names(parts) == [ENTER, "writer.release", EXIT]


# snapshot: the inputs an explanation diagnoses


def test_a_snapshot_reads_under_the_lock_without_the_claim_itself(parts: Parts) -> None:
    parts.reader.claim.return_value = CLAIM
    parts.reader.allocated_claims.return_value = [CLAIM, OTHER]
    node = V1Node(metadata=V1ObjectMeta(name="node-a"))
    request = Request(name="c1", namespace="team-a")

    snapshot = parts.decisions.snapshot(request, node=node)

    assert snapshot == (
        CLAIM,
        AllocationInputs(
            slices=(SLICE,), classes=CLASSES, allocated_claims=(OTHER,), namespace_labels=LABELS, node=node
        ),
    )
    parts.reader.claim.assert_called_once_with(request)
    parts.reader.namespace_labels.assert_called_once_with("team-a")
    assert names(parts) == [ENTER, EXIT]
    parts.allocator.attempt.assert_not_called()


def test_no_snapshot_for_a_claim_not_in_the_cache(parts: Parts) -> None:
    parts.reader.claim.return_value = None

    assert parts.decisions.snapshot(Request(name="c1", namespace="team-a")) is None
    parts.reader.slices.assert_not_called()
