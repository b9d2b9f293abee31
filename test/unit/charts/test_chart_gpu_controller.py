"""gpu-controller's Deployment in the chart: leader election by replicas, a hardened Pod, the values
reaching the container, its Service and ServiceMonitor; and the binary accepts the arguments the
chart passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import (
    NAMESPACE,
    RELEASE,
    SERVICE_MONITOR_API,
    assert_hardened,
    container,
    env_of,
    find,
    flag,
    install_notes,
    of,
    one,
    options_of_the_binary,
    render,
)

import pkg.app.gpu_controller as gpu_controller_app


@pytest.mark.parametrize(("replicas", "elect"), [(1, False), (2, True), (3, True)])
def test_leader_election_follows_replicas(helm: Path, replicas: int, elect: bool) -> None:
    docs = render(helm, {"controller.replicas": replicas})
    deployment = one(of(docs, "gpu-controller"), "Deployment")
    assert deployment["spec"]["replicas"] == replicas
    assert flag(docs, "leader-elect") == str(elect).lower()
    elections = [d for d in of(docs, "gpu-controller") if d["metadata"]["name"].endswith("-leader-election")]
    assert sorted(d["kind"] for d in elections) == (["Role", "RoleBinding"] if elect else [])
    assert len(find(of(docs, "gpu-controller"), "PodDisruptionBudget")) == int(elect)
    strategy = deployment["spec"]["strategy"]
    if elect:
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        budget = one(of(docs, "gpu-controller"), "PodDisruptionBudget")["spec"]
        assert budget["maxUnavailable"] == 1
        assert budget["selector"] == deployment["spec"]["selector"]
    else:
        assert strategy == {"type": "Recreate"}


def test_security_context_is_hardened(default_docs: list[dict[str, Any]]) -> None:
    pod = one(of(default_docs, "gpu-controller"), "Deployment")["spec"]["template"]["spec"]
    assert_hardened(pod, container(default_docs))


def test_container_command_args_env_and_probes(default_docs: list[dict[str, Any]]) -> None:
    main = container(default_docs)
    assert main["image"] == "gpu-control-plane:0.1.0"
    assert main["command"] == ["gpu-controller"]
    assert main["args"] == [
        "--metrics-bind-address=:8080",
        "--leader-elect=true",
        "--leader-election-id=gpu-controller-leader",
        "--workers=2",
        "--controllers=*",
        f"--operator-config={RELEASE}-gpu-control-plane",
    ]
    assert env_of(default_docs) == {
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "LOG_LEVEL": "Info",
        "LOG_OUTPUT": "stderr",
        "LOG_DEBUG_VERBOSITY": "0",
        "LOG_DEBUG_CONTROLLER_LIST": "",
    }
    assert main["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_values_reach_the_container(helm: Path) -> None:
    docs = render(
        helm,
        {
            "image": {"repository": "registry.example/gpu", "tag": "1.2.3", "pullPolicy": "Always"},
            "logging": {
                "level": "Warn",
                "output": "stdout",
                "debugVerbosity": 3,
                "debugControllers": ["physicalgpu", "gpuclass"],
            },
            "controller.workers": 7,
            "controller.controllers": "computedomain",
            "controller.metrics.port": 9443,
        },
    )
    main = container(docs)
    assert (main["image"], main["imagePullPolicy"]) == ("registry.example/gpu:1.2.3", "Always")
    assert flag(docs, "workers") == "7"
    assert flag(docs, "controllers") == "computedomain"
    assert flag(docs, "metrics-bind-address") == ":9443"
    assert main["ports"][0]["containerPort"] == 9443
    env = env_of(docs)
    assert (env["LOG_LEVEL"], env["LOG_OUTPUT"]) == ("Warn", "stdout")
    assert env["LOG_DEBUG_VERBOSITY"] == "3"
    assert env["LOG_DEBUG_CONTROLLER_LIST"] == "physicalgpu,gpuclass"
    service = one(of(docs, "gpu-controller"), "Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9443, "targetPort": "metrics", "protocol": "TCP"}
    ]


@pytest.mark.parametrize(
    ("level", "verbosity", "expected"), [("Debug", 0, "10"), ("debug", 4, "4"), ("Info", 0, "0")]
)
def test_debug_level_turns_on_deep_debug(helm: Path, level: str, verbosity: int, expected: str) -> None:
    """With logLevel=debug the components get LOG_DEBUG_VERBOSITY=10 unless set."""
    docs = render(helm, {"logging.level": level, "logging.debugVerbosity": verbosity})
    assert env_of(docs)["LOG_DEBUG_VERBOSITY"] == expected


def test_service_selects_exactly_the_controller_pods(default_docs: list[dict[str, Any]]) -> None:
    deployment = one(of(default_docs, "gpu-controller"), "Deployment")
    selector = one(of(default_docs, "gpu-controller"), "Service")["spec"]["selector"]
    assert selector == deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_default_affinity_spreads_replicas(default_docs: list[dict[str, Any]]) -> None:
    pod = one(of(default_docs, "gpu-controller"), "Deployment")["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == one(of(default_docs, "gpu-controller"), "Service")["spec"]["selector"]
    )


@pytest.mark.parametrize(("enabled", "served"), [(False, False), (False, True), (True, False), (True, True)])
def test_service_monitor_needs_the_value_and_the_api(helm: Path, enabled: bool, served: bool) -> None:
    docs = render(
        helm,
        {
            "controller.metrics.serviceMonitor.enabled": enabled,
            "controller.metrics.serviceMonitor.labels": {"release": "prometheus"},
        },
        api_versions=(SERVICE_MONITOR_API,) if served else (),
    )
    monitors = find(docs, "ServiceMonitor")
    assert len(monitors) == int(enabled and served)
    if monitors:
        (monitor,) = monitors
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
        assert (
            monitor["spec"]["selector"]["matchLabels"]
            == one(of(docs, "gpu-controller"), "Service")["spec"]["selector"]
        )
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]


def test_notes_warn_when_the_service_monitor_cannot_be_created(helm: Path) -> None:
    notes = install_notes(helm, {"controller.metrics.serviceMonitor.enabled": True})
    assert "WARNING: ServiceMonitors were asked for (controller.metrics.serviceMonitor.enabled)" in notes
    assert f"Lease {NAMESPACE}/gpu-controller-leader" in notes


@pytest.mark.parametrize("replicas", [1, 2])
def test_gpu_controller_accepts_the_rendered_args(
    helm: Path, replicas: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = render(helm, {"controller.replicas": replicas, "controller.workers": 5})
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    options = options_of_the_binary(gpu_controller_app, container(docs)["args"], monkeypatch)
    assert options.metrics_bind_address == ":8080"
    assert options.leader_elect is (replicas > 1)
    assert options.leader_election_namespace == NAMESPACE
    assert options.leader_election_id == "gpu-controller-leader"
    assert options.workers == 5


def test_lease_name_is_the_binary_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """config/rbac grants this Lease name, so a Deployment without the flag works with it too."""
    assert (
        options_of_the_binary(gpu_controller_app, [], monkeypatch).leader_election_id
        == "gpu-controller-leader"
    )
