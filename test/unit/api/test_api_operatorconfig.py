"""GPUOperatorConfig, the node components' configuration document: strict, typed, images required."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from api.gpu.v1alpha1 import GPUOperatorConfig, PullPolicy

DOCUMENT = """
apiVersion: gpu.deckhouse.io/v1alpha1
kind: GPUOperatorConfig
spec:
  imagePullSecrets: [regcred]
  nodeAgent:
    image: registry.example/gpu-control-plane:1.0
    udev: false
    tolerations: [{operator: Exists, effect: NoSchedule}]
    resources: {requests: {cpu: 10m}}
  validator:
    image: nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2
    env: [{name: COMPONENT, value: driver}]
"""


def parse(text: str) -> GPUOperatorConfig:
    data: Any = yaml.safe_load(text)
    return GPUOperatorConfig.model_validate(data)


def test_a_document_parses_with_defaults_for_what_it_leaves_out() -> None:
    config = parse(DOCUMENT)
    spec = config.spec
    assert spec.node_agent.enabled
    assert not spec.node_agent.udev
    assert spec.node_agent.metrics_port == 9478
    assert spec.node_agent.image_pull_policy is PullPolicy.IF_NOT_PRESENT
    assert spec.validator.host_root == "/"
    # A component the document leaves out does not run.
    assert [spec.gpu_handler.enabled, spec.dcgm.enabled, spec.dcgm_exporter.enabled] == [False] * 3
    assert config.to_api_dict()["spec"]["nodeAgent"]["tolerations"] == [
        {"operator": "Exists", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"nodeAgent": {"image": "x", "udevv": False}}, r"spec.nodeAgent.udevv\n  Extra inputs"),
        ({"gpuHandler": {"enabled": True}}, r"image is required when the component is enabled"),
        ({"dcgm": {"image": "x", "port": 0}}, r"spec.dcgm.port"),
        ({"nodeAgent": {"image": "x", "resyncPeriod": "soon"}}, r"spec.nodeAgent.resyncPeriod"),
        ({"nodeAgent": {"image": "x", "tolerations": [{"operatr": "Exists"}]}}, r"operatr"),
        ({"validator": {"image": "x", "imagePullPolicy": "Sometimes"}}, r"spec.validator.imagePullPolicy"),
    ],
)
def test_a_wrong_setting_is_an_error_naming_it(change: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        GPUOperatorConfig.model_validate({"spec": change})


def test_the_kind_is_checked() -> None:
    with pytest.raises(ValidationError, match=r"kind"):
        GPUOperatorConfig.model_validate({"kind": "ConfigMap", "spec": {}})
