"""gpu-handler publishing's publish handler alone: the last step of a publish pass, which builds the
selected cards' offers (an unhealthy card's offers carrying its device taints), hands them to the
ResourceSlice publisher with the Node as owner and the devices in use on the node, remembers that
something was published (which ends the start-up grace for good) and comes back after the
jittered resync period.

The state is the real scratch state as the node and select steps leave it, over cards described
by the simulated NVIDIA backend; the slice publisher is autospecced, the resync period a real
:class:`~pkg.framework.jitter.Jitter` with a fixed draw.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes.client import V1DeviceTaint, V1Node, V1ObjectMeta, V1OwnerReference
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu, simulated

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.dra.model.card import Card
from pkg.dra.model.offers import CardOffers
from pkg.dra.publisher import PublishResult, SlicePublisher
from pkg.framework.client import ConflictError
from pkg.framework.jitter import Jitter
from pkg.framework.reconcile import Result
from pkg.gpuhandler.publishing.handler.publish import PublishHandler
from pkg.gpuhandler.publishing.selection import Selection
from pkg.gpuhandler.publishing.state import PassMemory, PublishState

NODE = "node-1"
A30_SECOND = "0000:d8:00.0"
FIRST, SECOND = gpu(A30_FIRST, name="gpu-a"), gpu(A30_SECOND, name="gpu-b")
OWNER = V1OwnerReference(api_version="v1", kind="Node", name=NODE, uid="node-uid", controller=True)
TAINT = V1DeviceTaint(
    key="gpu.deckhouse.io/unhealthy",
    value="XidError",
    effect="NoSchedule",
    time_added=datetime(2026, 1, 1, tzinfo=UTC),
)


def node(uid: str | None = "node-uid") -> V1Node:
    return V1Node(metadata=V1ObjectMeta(name=NODE, uid=uid))


def description(c: PhysicalGPU) -> Card:
    return simulated().offer_inputs(c)


def selected(
    *cards: PhysicalGPU,
    in_use: frozenset[str] | None = None,
    taints: dict[str, list[V1DeviceTaint]] | None = None,
    memory: PassMemory | None = None,
) -> PublishState:
    """The state as the select step leaves it, ``cards`` offered (MIG allowed)."""
    state = PublishState(
        node_name=NODE,
        node=node(),
        gpus={str(c.metadata.name): c for c in cards},
        entries={},
        memory=memory if memory is not None else PassMemory(first_pass=1.0),
        taints=lambda address: list((taints or {}).get(address, [])),
        in_use=in_use,
    )
    state.selection = Selection(cards=tuple(description(c) for c in cards))
    return state


@pytest.fixture
def publisher(mocker: MockerFixture) -> MockType:
    p = mocker.create_autospec(SlicePublisher, instance=True)
    p.publish.return_value = PublishResult(generation=3, applied=("node-1-gpu.deckhouse.io-0",))
    return p


@pytest.fixture
def handler(publisher: MockType) -> PublishHandler:
    return PublishHandler(
        publisher=publisher, resync=Jitter(period=60.0, jitter=0.2, rand=lambda low, high: 1.1)
    )


def published(publisher: MockType) -> list[CardOffers]:
    [call] = publisher.publish.call_args_list
    node_name, cards = call.args
    assert node_name == NODE
    return list(cards)


def test_the_selected_cards_are_published_with_the_node_as_owner_and_come_back_at_resync(
    handler: PublishHandler, publisher: MockType
) -> None:
    in_use = frozenset({"gpu-0000-3b-00-0-mig-1g-6gb-0"})
    state = selected(FIRST, SECOND, in_use=in_use)

    result = handler.handle(state)

    assert result == Result(requeue_after=timedelta(seconds=66.0))  # 60 s scaled by the draw
    publisher.publish.assert_called_once()
    assert publisher.publish.call_args.kwargs == {"owner": OWNER, "in_use": in_use, "channels": []}
    cards = published(publisher)
    assert [c.card for c in cards] == [description(FIRST), description(SECOND)]
    assert all(c.offers for c in cards)
    assert state.memory.published is True


def test_without_the_devices_in_use_the_static_order_is_asked_for(
    handler: PublishHandler, publisher: MockType
) -> None:
    handler.handle(selected(FIRST))

    assert publisher.publish.call_args.kwargs["in_use"] is None


def test_an_unhealthy_cards_offers_all_carry_its_taints(handler: PublishHandler, publisher: MockType) -> None:
    handler.handle(selected(FIRST, SECOND, taints={A30_SECOND: [TAINT]}))

    healthy, unhealthy = published(publisher)
    assert all(not o.device.taints for o in healthy.offers)
    assert [o.device.taints for o in unhealthy.offers] == [[TAINT]] * len(unhealthy.offers)
    assert unhealthy.card.physical_gpu == "gpu-b"  # still offered: a blip withdraws nothing


def test_nothing_selected_publishes_an_empty_pool(handler: PublishHandler, publisher: MockType) -> None:
    state = selected()

    assert handler.handle(state) == Result(requeue_after=timedelta(seconds=66.0))

    assert published(publisher) == []  # the node's offers are withdrawn
    assert state.memory.published is True


def test_a_failed_publish_propagates_and_is_not_remembered(
    handler: PublishHandler, publisher: MockType
) -> None:
    publisher.publish.side_effect = ConflictError(status=409, reason="Conflict", message="generation moved")
    state = selected(FIRST)

    with pytest.raises(ConflictError):
        handler.handle(state)

    assert state.memory.published is False  # the start-up grace still applies


@pytest.mark.parametrize("missing", ["node", "selection"])
def test_a_pass_without_the_earlier_steps_results_is_a_bug_of_the_chain(
    handler: PublishHandler, publisher: MockType, missing: str
) -> None:
    state = selected(FIRST)
    setattr(state, missing, None)

    with pytest.raises(LookupError, match="run before publish"):
        handler.handle(state)

    publisher.publish.assert_not_called()
    assert state.memory.published is False


def test_a_node_without_a_uid_cannot_own_the_slices(handler: PublishHandler, publisher: MockType) -> None:
    state = selected(FIRST)
    state.node = node(uid=None)

    with pytest.raises(ValueError, match="no name or uid"):
        handler.handle(state)

    publisher.publish.assert_not_called()
