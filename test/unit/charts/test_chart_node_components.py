"""The chart's node components configuration: one ConfigMap the controller parses, every component
rendered by gpu-controller from it, NVIDIA's images by default, values reaching the DaemonSets."""

from __future__ import annotations

from pathlib import Path

import yaml
from testutil.unit.charts.chart_render import (
    NAMESPACE,
    RELEASE,
    flag,
    node_daemon_sets,
    of,
    one,
    render,
)


def test_by_default_every_component_runs_from_the_release_config_map(helm: Path) -> None:
    docs = render(helm)
    config_map = one(of(docs, "node-components"), "ConfigMap")
    assert (config_map["metadata"]["name"], config_map["metadata"]["namespace"]) == (
        f"{RELEASE}-gpu-control-plane",
        NAMESPACE,
    )
    assert flag(docs, "operator-config") == config_map["metadata"]["name"]
    rendered = node_daemon_sets(docs)
    assert {component: ds["metadata"]["name"] for component, ds in rendered.items()} == {
        component: f"{RELEASE}-gpu-control-plane-{component}"
        for component in ("gpu-node-agent", "gpu-validator", "gpu-handler", "nv-hostengine", "dcgm-exporter")
    }
    images = {c: ds["spec"]["template"]["spec"]["containers"][0]["image"] for c, ds in rendered.items()}
    assert images["gpu-validator"] == "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2"
    assert images["nv-hostengine"].startswith("nvcr.io/nvidia/cloud-native/dcgm:")
    assert images["dcgm-exporter"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    document = yaml.safe_load(config_map["data"]["config.yaml"])
    assert (document["apiVersion"], document["kind"]) == ("gpu.deckhouse.io/v1alpha1", "GPUOperatorConfig")


def test_validator_values_reach_its_daemon_set(helm: Path) -> None:
    docs = render(
        helm,
        {
            "validator.image": {"repository": "gpucp.test/busybox", "tag": "1.35"},
            "validator.pullPolicy": "Never",
            "validator.command": ["sh", "-c", "test -c /host/dev/nvidiactl"],
            "validator.readinessCommand": ["test", "-c", "/host/dev/nvidiactl"],
            "validator.hostRoot": "/srv/host",
            "validator.env": [{"name": "WITH_WAIT", "value": "true"}],
        },
    )
    pod = node_daemon_sets(docs)["gpu-validator"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert (init["image"], init["imagePullPolicy"]) == ("gpucp.test/busybox:1.35", "Never")
    assert init["command"] == ["sh", "-c", "test -c /host/dev/nvidiactl"]
    assert "args" not in init
    assert init["env"][-1] == {"name": "WITH_WAIT", "value": "true"}
    assert pod["containers"][0]["readinessProbe"]["exec"] == {
        "command": ["test", "-c", "/host/dev/nvidiactl"]
    }
    assert pod["volumes"] == [{"name": "host-root", "hostPath": {"path": "/srv/host", "type": "Directory"}}]
    assert pod["nodeSelector"] == {"gpu.deckhouse.io/nvidia.present": "true"}


def test_dcgm_values_reach_their_daemon_sets(helm: Path) -> None:
    docs = render(
        helm, {"dcgm.port": 6000, "dcgm.runtimeClassName": "nvidia", "dcgmExporter.podResourcesPath": ""}
    )
    rendered = node_daemon_sets(docs)
    engine = rendered["nv-hostengine"]["spec"]["template"]["spec"]
    assert engine["runtimeClassName"] == "nvidia"
    assert engine["containers"][0]["ports"][0]["hostPort"] == 6000
    exporter = rendered["dcgm-exporter"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in exporter["containers"][0]["env"]}
    assert env["DCGM_REMOTE_HOSTENGINE_INFO"] == "$(NODE_IP):6000"
    assert env["DCGM_EXPORTER_KUBERNETES"] == "false"
    assert "volumes" not in exporter


def test_components_can_be_switched_off(helm: Path) -> None:
    docs = render(helm, {"validator.enabled": False, "dcgm.enabled": False, "dcgmExporter.enabled": False})
    assert set(node_daemon_sets(docs)) == {"gpu-node-agent", "gpu-handler"}


def test_a_lower_case_log_level_still_makes_a_valid_document(helm: Path) -> None:
    docs = render(helm, {"logging.level": "debug"})
    (agent,) = node_daemon_sets(docs)["gpu-node-agent"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert (env["LOG_LEVEL"], env["LOG_DEBUG_VERBOSITY"]) == ("Debug", "10")
