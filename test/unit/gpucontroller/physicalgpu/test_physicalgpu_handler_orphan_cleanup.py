"""The orphan-cleanup step: a card whose Node is gone is deleted through the service (an Event
only when this pass deleted it) and the chain stops; a card being deleted stops the chain too."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytest_mock import MockerFixture, MockType

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import Resource, StopHandlerChain
from pkg.gpucontroller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState, state_factory

MakeGPU = Callable[..., PhysicalGPU]  # the physical_gpu and gpu_resource fixtures (conftest.py)
MakeResource = Callable[[PhysicalGPU], Resource[PhysicalGPU, PhysicalGPUStatus]]


@pytest.fixture
def deleter(mocker: MockerFixture) -> MockType:
    deleter: MockType = mocker.Mock()
    deleter.delete.return_value = True
    return deleter


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    recorder: MockType = mocker.Mock(spec=EventRecorderLogger)
    return recorder


@pytest.fixture
def handler(deleter: MockType, recorder: MockType) -> OrphanCleanupHandler:
    return OrphanCleanupHandler(deleter=deleter, recorder=recorder)


def state(resource: Resource[PhysicalGPU, PhysicalGPUStatus], *, node_exists: bool) -> PhysicalGPUState:
    return state_factory(lambda _n: node_exists)(resource)


def test_a_card_of_a_deleted_node_is_deleted_and_the_chain_stops(
    handler: OrphanCleanupHandler,
    deleter: MockType,
    recorder: MockType,
    physical_gpu: MakeGPU,
    gpu_resource: MakeResource,
) -> None:
    resource = gpu_resource(physical_gpu(node="gone"))
    with pytest.raises(StopHandlerChain) as stop:
        handler.handle(state(resource, node_exists=False))
    assert stop.value.reason == "node gone is gone"
    deleter.delete.assert_called_once_with(resource.original)
    recorder.event.assert_called_once_with(
        resource.original,
        type_="Normal",
        reason="NodeGone",
        message="node gone no longer exists; deleted its PhysicalGPU",
    )


def test_an_orphan_already_gone_records_no_event_but_still_stops_the_chain(
    handler: OrphanCleanupHandler,
    deleter: MockType,
    recorder: MockType,
    physical_gpu: MakeGPU,
    gpu_resource: MakeResource,
) -> None:
    deleter.delete.return_value = False
    with pytest.raises(StopHandlerChain):
        handler.handle(state(gpu_resource(physical_gpu(node="gone")), node_exists=False))
    deleter.delete.assert_called_once()
    recorder.event.assert_not_called()


@pytest.mark.parametrize(
    ("node", "node_exists"), [("n1", True), (None, False)], ids=["node-exists", "no-node-label"]
)
def test_a_card_with_a_node_or_without_a_node_label_is_kept_and_the_chain_goes_on(
    handler: OrphanCleanupHandler,
    deleter: MockType,
    recorder: MockType,
    physical_gpu: MakeGPU,
    gpu_resource: MakeResource,
    node: str | None,
    node_exists: bool,
) -> None:
    assert handler.handle(state(gpu_resource(physical_gpu(node=node)), node_exists=node_exists)) is None
    deleter.delete.assert_not_called()
    recorder.event.assert_not_called()


def test_a_card_being_deleted_stops_the_chain_without_a_delete(
    handler: OrphanCleanupHandler, deleter: MockType, physical_gpu: MakeGPU, gpu_resource: MakeResource
) -> None:
    with pytest.raises(StopHandlerChain) as stop:
        handler.handle(state(gpu_resource(physical_gpu(node="gone", deleting=True)), node_exists=False))
    assert stop.value.reason == "being deleted"
    deleter.delete.assert_not_called()
