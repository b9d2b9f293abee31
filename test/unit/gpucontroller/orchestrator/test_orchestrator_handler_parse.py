"""gpu-controller orchestrator's parse handler alone: the first step of a pass, which reads the
configuration document out of the ConfigMap and renders the DaemonSet of every enabled component
into the state for the prune and apply steps. A document that does not parse renders nothing,
stops the chain (no retry: only a new ConfigMap can fix it) and says why in a Warning Event on the
ConfigMap.

The state is the real scratch state the reconciler builds (ConfigMap and owned DaemonSets); the
event recorder is autospecced.
"""

from __future__ import annotations

import pytest
import yaml
from pytest_mock import MockerFixture, MockType
from testutil.k8s_fields import name_of
from testutil.unit.gpucontroller.orchestrator.orchestrator_values import DOCUMENT, config_map, owned

from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.gpucontroller.names import Component
from pkg.gpucontroller.orchestrator.internal.config import parse_config
from pkg.gpucontroller.orchestrator.internal.handler.parse import ParseHandler
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    return mocker.create_autospec(EventRecorderLogger, instance=True)


@pytest.fixture
def handler(recorder: MockType) -> ParseHandler:
    return ParseHandler(recorder=recorder)


def test_a_valid_document_renders_a_daemon_set_per_enabled_component(
    handler: ParseHandler, recorder: MockType
) -> None:
    cm = config_map()
    state = OrchestratorState(config_map=cm, owned=(owned("nv-hostengine"),))

    assert handler.handle(state) is None

    assert state.context is not None
    assert state.context.config_map is cm
    assert state.context.spec == parse_config(cm)
    assert list(state.desired) == [Component.NODE_AGENT, Component.VALIDATOR]
    assert [name_of(ds) for ds in state.desired.values()] == ["gcp-gpu-node-agent", "gcp-gpu-validator"]
    assert all(ds.metadata is not None and ds.metadata.namespace == "gpu" for ds in state.desired.values())
    assert [name_of(ds) for ds in state.owned] == ["gcp-nv-hostengine"]  # pruning is the next step's
    recorder.event.assert_not_called()


def test_a_document_enabling_nothing_renders_nothing(handler: ParseHandler, recorder: MockType) -> None:
    document = DOCUMENT | {
        "spec": {
            "nodeAgent": {"enabled": False},
            "validator": {"enabled": False},
            "gpuHandler": {"enabled": False},
        }
    }
    state = OrchestratorState(config_map=config_map({"config.yaml": yaml.safe_dump(document)}), owned=())

    assert handler.handle(state) is None

    assert state.context is not None
    assert state.desired == {}
    recorder.event.assert_not_called()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({}, "ConfigMap gpu/gcp has no key config.yaml"),
        ({"config.yaml": "spec: [unclosed"}, "ConfigMap gpu/gcp, config.yaml: not YAML"),
        ({"config.yaml": "spec: {nodeAgent: {imagee: x}}"}, "spec.nodeAgent.imagee"),
    ],
    ids=["no-key", "not-yaml", "unknown-field"],
)
def test_a_broken_document_stops_the_chain_renders_nothing_and_says_why(
    handler: ParseHandler, recorder: MockType, data: dict[str, str], error: str
) -> None:
    cm = config_map(data)
    state = OrchestratorState(config_map=cm, owned=(owned("gpu-node-agent"),))

    with pytest.raises(StopHandlerChain, match="invalid configuration") as stop:
        handler.handle(state)

    assert stop.value.result is None  # not retried: a new version of the ConfigMap wakes the controller
    assert state.context is None
    assert state.desired == {}
    recorder.event.assert_called_once()
    assert recorder.event.call_args.args == (cm,)
    told = recorder.event.call_args.kwargs
    assert (told["type_"], told["reason"], told["kind"]) == ("Warning", "InvalidConfig", CONFIG_MAP)
    assert error in told["message"]
