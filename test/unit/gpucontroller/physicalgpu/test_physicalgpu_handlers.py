"""Handlers and state of the PhysicalGPU controller.

Each handler is taken from the real container (``PhysicalGPUContainer``) with its service, its
recorder and its clock overridden, so the test exercises the wiring the process uses too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from dependency_injector import providers
from kubernetes.client import V1Condition, V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_NODE, NodeInfo, PhysicalGPU, PhysicalGPUStatus
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import Resource, StopHandlerChain
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler
from pkg.gpucontroller.physicalgpu.internal.state import state_factory
from pkg.gpucontroller.physicalgpu.setup import PhysicalGPUContainer

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)


def _container(mocker: Any, *, deleter: Any = None, recorder: Any = None) -> PhysicalGPUContainer:
    container = PhysicalGPUContainer(
        client=mocker.Mock(spec=KubeClient),
        informers=mocker.Mock(spec=InformerFactory),
        recorder=mocker.Mock(spec=EventRecorderLogger),
    )
    container.now.override(providers.Object(lambda: NOW))
    if deleter is not None:
        container.service.override(providers.Object(deleter))
    if recorder is not None:
        container.recorder.override(providers.Object(recorder))
    return container


def _handler(container: PhysicalGPUContainer, kind: type[Any]) -> Any:
    [handler] = [h for h in container.handlers() if isinstance(h, kind)]
    return handler


def default_conditions(mocker: Any) -> DefaultConditionsHandler:
    return _handler(_container(mocker), DefaultConditionsHandler)  # type: ignore[no-any-return]


def orphan_cleanup(mocker: Any, *, deleter: Any, recorder: Any = None) -> OrphanCleanupHandler:
    container = _container(
        mocker, deleter=deleter, recorder=recorder or mocker.Mock(spec=EventRecorderLogger)
    )
    return _handler(container, OrphanCleanupHandler)  # type: ignore[no-any-return]


def _resource(mocker: Any, gpu: PhysicalGPU) -> Resource[PhysicalGPU, PhysicalGPUStatus]:
    resource = Resource(
        Request(name=str(gpu.metadata.name)),
        getter=lambda _r: gpu,
        writer=mocker.Mock(),
        status_type=PhysicalGPUStatus,
    )
    resource.fetch()
    return resource


def _gpu(
    *, node: str | None = "n1", conditions: list[V1Condition] | None = None, deleting: bool = False
) -> PhysicalGPU:
    return PhysicalGPU(
        metadata=V1ObjectMeta(
            name="n1-0-10de-20b7",
            uid="u1",
            generation=3,
            labels={LABEL_NODE: node} if node else {},
            deletion_timestamp=NOW if deleting else None,
        ),
        status=PhysicalGPUStatus(conditions=conditions) if conditions is not None else None,
    )


def test_state_reports_whether_the_node_exists(mocker: Any) -> None:
    build = state_factory(lambda name: name == "n1")
    assert build(_resource(mocker, _gpu(node="n1"))).node_exists is True
    assert build(_resource(mocker, _gpu(node="n2"))).node_exists is False
    unlabelled = build(_resource(mocker, _gpu(node=None)))
    assert unlabelled.node_name is None
    assert unlabelled.node_exists is False


def test_missing_conditions_become_unknown_validation_pending(mocker: Any) -> None:
    state = state_factory(lambda _n: True)(_resource(mocker, _gpu()))
    default_conditions(mocker).handle(state)
    conditions = {c.type: c for c in state.status.conditions or []}
    assert set(conditions) == {"DriverReady", "HardwareHealthy"}
    for condition in conditions.values():
        assert (condition.status, condition.reason) == ("Unknown", "ValidationPending")
        assert condition.observed_generation == 3
        assert condition.last_transition_time == NOW


def test_validator_conditions_are_never_overwritten(mocker: Any) -> None:
    validated = V1Condition(
        type="DriverReady", status="True", reason="Validated", message="ok", last_transition_time=NOW
    )
    state = state_factory(lambda _n: True)(_resource(mocker, _gpu(conditions=[validated])))
    default_conditions(mocker).handle(state)
    by_type = {c.type: (c.status, c.reason) for c in state.status.conditions or []}
    assert by_type == {
        "DriverReady": ("True", "Validated"),
        "HardwareHealthy": ("Unknown", "ValidationPending"),
    }


def test_complete_conditions_leave_status_untouched(mocker: Any) -> None:
    both = [
        V1Condition(type=t, status="True", reason="Validated", message="", last_transition_time=NOW)
        for t in ("DriverReady", "HardwareHealthy")
    ]
    resource = _resource(mocker, _gpu(conditions=both))
    default_conditions(mocker).handle(state_factory(lambda _n: True)(resource))
    assert resource.changed().status == resource.original.status


def test_orphan_of_a_deleted_node_is_deleted_and_chain_stops(mocker: Any) -> None:
    deleter, recorder = mocker.Mock(), mocker.Mock(spec=EventRecorderLogger)
    deleter.delete.return_value = True
    state = state_factory(lambda _n: False)(_resource(mocker, _gpu(node="gone")))
    with pytest.raises(StopHandlerChain):
        orphan_cleanup(mocker, deleter=deleter, recorder=recorder).handle(state)
    deleter.delete.assert_called_once()
    assert deleter.delete.call_args.args[0].metadata.uid == "u1"
    assert recorder.event.call_args.kwargs["reason"] == "NodeGone"


def test_card_on_existing_node_is_kept(mocker: Any) -> None:
    deleter = mocker.Mock()
    state = state_factory(lambda _n: True)(_resource(mocker, _gpu()))
    assert orphan_cleanup(mocker, deleter=deleter).handle(state) is None
    deleter.delete.assert_not_called()


def test_unlabelled_card_is_not_treated_as_orphan(mocker: Any) -> None:
    deleter = mocker.Mock()
    state = state_factory(lambda _n: False)(_resource(mocker, _gpu(node=None)))
    assert orphan_cleanup(mocker, deleter=deleter).handle(state) is None
    deleter.delete.assert_not_called()


def test_already_gone_orphan_records_no_event(mocker: Any) -> None:
    deleter, recorder = mocker.Mock(), mocker.Mock(spec=EventRecorderLogger)
    deleter.delete.return_value = False
    state = state_factory(lambda _n: False)(_resource(mocker, _gpu(node="gone")))
    with pytest.raises(StopHandlerChain):
        orphan_cleanup(mocker, deleter=deleter, recorder=recorder).handle(state)
    recorder.event.assert_not_called()


def test_object_being_deleted_stops_the_chain(mocker: Any) -> None:
    deleter = mocker.Mock()
    state = state_factory(lambda _n: False)(_resource(mocker, _gpu(deleting=True)))
    with pytest.raises(StopHandlerChain):
        orphan_cleanup(mocker, deleter=deleter).handle(state)
    deleter.delete.assert_not_called()


def test_state_prefers_the_full_node_name_from_status(mocker: Any) -> None:
    long_name = "n" * 70
    gpu = _gpu(node="n" * 54 + "-0123abcd")  # the shortened label value
    gpu.status = PhysicalGPUStatus(node_info=NodeInfo(node_name=long_name))
    state = state_factory(lambda name: name == long_name)(_resource(mocker, gpu))
    assert state.node_name == long_name
    assert state.node_exists is True


def test_the_container_wires_the_chain_in_order(mocker: Any) -> None:
    handlers = _container(mocker).handlers()
    assert [h.name for h in handlers] == ["orphan-cleanup", "driver-ready", "default-conditions"]
