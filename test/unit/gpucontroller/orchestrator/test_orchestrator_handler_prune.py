"""gpu-controller orchestrator's prune handler alone: the step between parse and apply, which deletes
the DaemonSets this ConfigMap rendered before for components the document no longer enables, each
announced by an Event on the ConfigMap. The writer deletes with a uid precondition; a DaemonSet
already gone is not announced.

The state is the real scratch state as the parse step leaves it (the cached DaemonSets of earlier
passes, the document's DaemonSets rendered by the real renderers); the DaemonSet writer and the
event recorder are autospecced.
"""

from __future__ import annotations

import pytest
from kubernetes.client import (
    V1DaemonSet,
    V1DaemonSetSpec,
    V1LabelSelector,
    V1PodTemplateSpec,
)
from pytest_mock import MockerFixture, MockType
from testutil.k8s_fields import name_of
from testutil.unit.gpucontroller.orchestrator.orchestrator_values import owned, parsed

from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.client.errors import ApiError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpucontroller.orchestrator.internal.handler.prune import PruneHandler
from pkg.gpucontroller.orchestrator.internal.service import KubeDaemonSetWriter


@pytest.fixture
def writer(mocker: MockerFixture) -> MockType:
    w = mocker.create_autospec(KubeDaemonSetWriter, instance=True)
    w.delete.return_value = True
    return w


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(EventRecorderLogger, instance=True)


@pytest.fixture
def handler(writer: MockType, recorder: MockType) -> PruneHandler:
    return PruneHandler(writer=writer, recorder=recorder)


def test_daemon_sets_of_enabled_components_are_kept(
    handler: PruneHandler, writer: MockType, recorder: MockType
) -> None:
    assert handler.handle(parsed(owned("gpu-node-agent"), owned("gpu-validator"))) is None

    writer.delete.assert_not_called()
    recorder.event.assert_not_called()


def test_a_component_switched_off_is_deleted_and_announced(
    handler: PruneHandler, writer: MockType, recorder: MockType
) -> None:
    dcgm, exporter = owned("nv-hostengine"), owned("dcgm-exporter")
    state = parsed(owned("gpu-node-agent"), dcgm, owned("gpu-validator"), exporter)

    assert handler.handle(state) is None

    assert [call.args for call in writer.delete.call_args_list] == [(dcgm,), (exporter,)]
    assert [call.args for call in recorder.event.call_args_list] == [(state.config_map,)] * 2
    assert [call.kwargs for call in recorder.event.call_args_list] == [
        {
            "type_": "Normal",
            "reason": "DaemonSetPruned",
            "message": f"deleted DaemonSet {name_of(ds)}: {component} is no longer enabled",
            "kind": CONFIG_MAP,
        }
        for ds, component in ((dcgm, "nv-hostengine"), (exporter, "dcgm-exporter"))
    ]


def test_everything_goes_when_the_document_enables_nothing(
    handler: PruneHandler, writer: MockType, recorder: MockType
) -> None:
    state = parsed(owned("gpu-node-agent"), owned("gpu-validator"))
    state.desired = {}

    handler.handle(state)

    assert [name_of(call.args[0]) for call in writer.delete.call_args_list] == [
        "gcp-gpu-node-agent",
        "gcp-gpu-validator",
    ]
    assert recorder.event.call_count == 2


def test_a_daemon_set_already_gone_is_not_announced(
    handler: PruneHandler, writer: MockType, recorder: MockType
) -> None:
    writer.delete.return_value = False

    handler.handle(parsed(owned("nv-hostengine")))

    writer.delete.assert_called_once()
    recorder.event.assert_not_called()


def test_a_cached_object_without_metadata_is_skipped(
    handler: PruneHandler, writer: MockType, recorder: MockType
) -> None:
    anonymous = V1DaemonSet(
        metadata=None, spec=V1DaemonSetSpec(selector=V1LabelSelector(), template=V1PodTemplateSpec())
    )

    handler.handle(parsed(anonymous))

    writer.delete.assert_not_called()
    recorder.event.assert_not_called()


def test_a_failed_delete_propagates_and_stops_pruning(
    handler: PruneHandler, writer: MockType, recorder: MockType
) -> None:
    writer.delete.side_effect = ApiError(status=500, reason="InternalError", message="etcd timeout")

    with pytest.raises(ApiError, match="etcd timeout"):
        handler.handle(parsed(owned("nv-hostengine"), owned("dcgm-exporter")))

    writer.delete.assert_called_once()
    recorder.event.assert_not_called()
