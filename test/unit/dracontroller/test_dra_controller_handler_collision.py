"""gpu-dra-controller's collision handler alone: for a claim we allocated, the last step. A claim a
Pod reserves keeps its allocation; otherwise the decisions service checks for a collision with
another claim and gives the allocation back if there is one. Either way the chain ends there: an
allocation given back is announced (a ``Reallocating`` Warning, the collisions counter) and the
claim requeued to be allocated again from what is really free.

The snapshot is built by the reconciler's own ``state_factory``; the decisions service, the event
recorder and the cache reader are autospecced.
"""

from __future__ import annotations

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
)
from pytest_mock import MockerFixture, MockType
from testutil.unit.dra.allocator.alloc_builders import claim, exact
from testutil.unit.dracontroller.dra_controller_handler_values import ours, snapshot_of

from pkg.domain.metrics import registry
from pkg.dracontroller.internal.handler.collision import CollisionHandler, check_collision
from pkg.dracontroller.internal.service import CacheReader, Decisions, Release
from pkg.framework.client import ConflictError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result

REASON = "device gpu-0-mig-1g-0 is also allocated to default/older"


def never_yields(c: ResourceV1ResourceClaim, cache_reader: CacheReader) -> str | None:
    """A collision check of the test's own, to see the handler pass it on."""
    return None


@pytest.fixture
def decisions(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(Decisions, instance=True)


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(EventRecorderLogger, instance=True)


@pytest.fixture
def handler(decisions: MockType, recorder: MockType) -> CollisionHandler:
    return CollisionHandler(decisions=decisions, recorder=recorder, check=never_yields)


def collisions() -> float:
    return registry.get_sample_value("gpu_dra_allocation_collisions_total") or 0.0


def test_an_unallocated_claim_goes_on_to_allocation(
    mocker: MockerFixture, handler: CollisionHandler, decisions: MockType, recorder: MockType
) -> None:
    assert handler.handle(snapshot_of(mocker, claim("train", exact("gpu", "mig-1g")))) is None

    decisions.release_if_colliding.assert_not_called()
    recorder.event.assert_not_called()


def test_a_reserved_claim_keeps_its_allocation_and_ends_the_chain_unchecked(
    mocker: MockerFixture, handler: CollisionHandler, decisions: MockType, recorder: MockType
) -> None:
    with pytest.raises(StopHandlerChain, match="reserved by a consumer") as stop:
        handler.handle(snapshot_of(mocker, ours(reserved=True)))

    assert stop.value.result is None
    decisions.release_if_colliding.assert_not_called()
    recorder.event.assert_not_called()


def test_a_claim_without_a_collision_ends_the_chain_without_a_requeue(
    mocker: MockerFixture, handler: CollisionHandler, decisions: MockType, recorder: MockType
) -> None:
    decisions.release_if_colliding.return_value = None
    snapshot = snapshot_of(mocker, ours())
    before = collisions()

    with pytest.raises(StopHandlerChain, match="no collision") as stop:
        handler.handle(snapshot)

    assert stop.value.result is None
    decisions.release_if_colliding.assert_called_once_with(snapshot.claim, check=never_yields)
    recorder.event.assert_not_called()
    assert collisions() == before


def test_the_collision_check_defaults_to_the_controllers_rules(
    mocker: MockerFixture, decisions: MockType, recorder: MockType
) -> None:
    decisions.release_if_colliding.return_value = None
    snapshot = snapshot_of(mocker, ours())

    with pytest.raises(StopHandlerChain):
        CollisionHandler(decisions=decisions, recorder=recorder).handle(snapshot)

    decisions.release_if_colliding.assert_called_once_with(snapshot.claim, check=check_collision)


def test_a_colliding_claim_gives_its_allocation_back_says_so_and_is_requeued(
    mocker: MockerFixture, handler: CollisionHandler, decisions: MockType, recorder: MockType
) -> None:
    released = claim("train", exact("gpu", "mig-1g"))  # as written without its allocation
    decisions.release_if_colliding.return_value = Release(reason=REASON, released=released)
    before = collisions()

    with pytest.raises(StopHandlerChain, match="released after a collision") as stop:
        handler.handle(snapshot_of(mocker, ours()))

    assert stop.value.result == Result(requeue=True)
    recorder.event.assert_called_once_with(
        released,
        type_="Warning",
        reason="Reallocating",
        message=f"{REASON}; gave the allocation back to allocate the claim again",
        kind=RESOURCE_CLAIM,
    )
    assert collisions() == before + 1


def test_a_colliding_claim_deleted_meanwhile_is_requeued_without_an_event(
    mocker: MockerFixture, handler: CollisionHandler, decisions: MockType, recorder: MockType
) -> None:
    decisions.release_if_colliding.return_value = Release(reason=REASON, released=None)
    before = collisions()

    with pytest.raises(StopHandlerChain) as stop:
        handler.handle(snapshot_of(mocker, ours()))

    assert stop.value.result == Result(requeue=True)
    assert REASON in stop.value.reason
    recorder.event.assert_not_called()
    assert collisions() == before


def test_a_failed_release_propagates_without_an_event(
    mocker: MockerFixture, handler: CollisionHandler, decisions: MockType, recorder: MockType
) -> None:
    decisions.release_if_colliding.side_effect = ConflictError(
        status=409, reason="Conflict", message="modified"
    )
    before = collisions()

    with pytest.raises(ConflictError):
        handler.handle(snapshot_of(mocker, ours()))

    recorder.event.assert_not_called()
    assert collisions() == before
