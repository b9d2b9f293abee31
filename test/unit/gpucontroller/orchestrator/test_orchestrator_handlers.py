"""The orchestrator's pass, from the real container with the writer and recorder overridden: a broken
document changes nothing and says why, disabled components are pruned, changes are announced once,
and a refused DaemonSet does not stop the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from dependency_injector import providers
from kubernetes.client import (
    V1ConfigMap,
    V1DaemonSet,
    V1ObjectMeta,
)
from testutil.k8s_fields import name_of
from testutil.unit.gpucontroller.orchestrator.orchestrator_values import owned

from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.errors import InvalidError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.gpucontroller.orchestrator.internal.config import InvalidConfigError, parse_config
from pkg.gpucontroller.orchestrator.internal.handler.apply import ApplyError
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState
from pkg.gpucontroller.orchestrator.internal.watch.config_map import config_changed
from pkg.gpucontroller.orchestrator.internal.watch.daemon_set import spec_or_ownership_changed
from pkg.gpucontroller.orchestrator.setup import OrchestratorContainer

DOCUMENT = {
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "kind": "GPUOperatorConfig",
    "spec": {"nodeAgent": {"image": "a"}, "validator": {"image": "v"}},
}


def config_map(data: dict[str, str] | None = None) -> V1ConfigMap:
    return V1ConfigMap(
        metadata=V1ObjectMeta(name="gcp", namespace="gpu", uid="cm"),
        data=data if data is not None else {"config.yaml": yaml.safe_dump(DOCUMENT)},
    )


class Pass:
    def __init__(self, mocker: Any) -> None:
        self.writer = mocker.Mock()
        self.writer.apply.side_effect = lambda ds: ds.model_copy(
            update={"metadata": ds.metadata.model_copy(update={"generation": 1})}
        )
        self.writer.delete.return_value = True
        self.writer.generation.return_value = None
        self.recorder = mocker.Mock(spec=EventRecorderLogger)
        container = OrchestratorContainer(
            client=mocker.Mock(spec=KubeClient),
            informers=mocker.Mock(spec=InformerFactory),
            recorder=self.recorder,
        )
        container.writer.override(providers.Object(self.writer))
        self.handlers = container.handlers()

    def run(self, cm: V1ConfigMap, *owned_sets: V1DaemonSet) -> OrchestratorState:
        state = OrchestratorState(config_map=cm, owned=owned_sets)
        for handler in self.handlers:
            try:
                handler.handle(state)
            except StopHandlerChain:
                break
        return state

    def events(self) -> list[tuple[str, str]]:
        return [(c.kwargs["reason"], c.kwargs["message"]) for c in self.recorder.event.call_args_list]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({}, "ConfigMap gpu/gcp has no key config.yaml"),
        ({"config.yaml": "spec: [unclosed"}, "ConfigMap gpu/gcp, config.yaml: not YAML"),
        ({"config.yaml": "spec: {nodeAgent: {imagee: x}}"}, "spec.nodeAgent.imagee"),
        ({"config.yaml": "kind: Other"}, "kind"),
    ],
)
def test_a_broken_document_changes_nothing_and_says_why(
    mocker: Any, data: dict[str, str], error: str
) -> None:
    with pytest.raises(InvalidConfigError, match=error):
        parse_config(config_map(data))
    run = Pass(mocker)
    run.run(config_map(data), owned("gpu-node-agent"))
    run.writer.apply.assert_not_called()
    run.writer.delete.assert_not_called()
    [(reason, message)] = run.events()
    assert reason == "InvalidConfig"
    assert error in message


def test_a_first_pass_creates_every_enabled_daemon_set(mocker: Any) -> None:
    run = Pass(mocker)
    run.run(config_map())
    assert [c.args[0].metadata.name for c in run.writer.apply.call_args_list] == [
        "gcp-gpu-node-agent",
        "gcp-gpu-validator",
    ]
    assert run.events() == [
        ("DaemonSetApplied", "created DaemonSet gcp-gpu-node-agent"),
        ("DaemonSetApplied", "created DaemonSet gcp-gpu-validator"),
    ]


def test_a_daemon_set_created_by_the_last_pass_is_not_announced_again(mocker: Any) -> None:
    run = Pass(mocker)
    run.writer.generation.return_value = 1  # stored, but its event has not reached the cache
    run.run(config_map(), owned("gpu-node-agent"))
    run.writer.generation.assert_called_once()
    assert run.events() == []


def test_an_unchanged_pass_applies_but_announces_nothing(mocker: Any) -> None:
    run = Pass(mocker)
    run.run(config_map(), owned("gpu-node-agent"), owned("gpu-validator"))
    assert run.writer.apply.call_count == 2
    assert run.events() == []


def test_a_component_switched_off_is_pruned(mocker: Any) -> None:
    run = Pass(mocker)
    dcgm = owned("nv-hostengine")
    run.run(config_map(), owned("gpu-node-agent"), owned("gpu-validator"), dcgm)
    run.writer.delete.assert_called_once_with(dcgm)
    assert (
        "DaemonSetPruned",
        "deleted DaemonSet gcp-nv-hostengine: nv-hostengine is no longer enabled",
    ) in run.events()


def test_a_refused_daemon_set_is_reported_and_the_others_still_applied(mocker: Any) -> None:
    run = Pass(mocker)
    refused = InvalidError(
        status=422, reason="Invalid", message="spec.template.spec.containers[0].image: Required"
    )

    def apply(ds: V1DaemonSet) -> V1DaemonSet:
        if name_of(ds) == "gcp-gpu-node-agent":
            raise refused
        return ds

    run.writer.apply.side_effect = apply
    state = OrchestratorState(config_map=config_map(), owned=())
    parse, prune, apply_step = run.handlers
    parse.handle(state)
    prune.handle(state)
    with pytest.raises(ApplyError, match="DaemonSet gcp-gpu-node-agent: 422 Invalid"):
        apply_step.handle(state)
    assert run.writer.apply.call_count == 2
    assert [reason for reason, _ in run.events()] == ["DaemonSetRejected", "DaemonSetApplied"]


def test_watches_ignore_status_noise() -> None:
    assert not config_changed(config_map(), config_map())
    assert config_changed(config_map(), config_map({"config.yaml": "x"}))
    busy = owned("gpu-validator")
    assert not spec_or_ownership_changed(busy, owned("gpu-validator"))
    assert spec_or_ownership_changed(busy, owned("gpu-validator", generation=2))


def test_the_sample_config_map_is_a_valid_document() -> None:
    sample = Path(__file__).resolve().parents[4] / "config" / "samples" / "operator-config.yaml"
    spec = parse_config(V1ConfigMap.model_validate(yaml.safe_load(sample.read_text())))
    assert [spec.node_agent.enabled, spec.validator.enabled, spec.gpu_handler.enabled] == [True] * 3
    assert spec.gpu_handler.service_account_name == "gpu-control-plane-gpu-handler"
