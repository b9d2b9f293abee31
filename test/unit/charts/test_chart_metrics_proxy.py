"""Metrics only through kube-rbac-proxy, the chart's default
(docs/architecture.md#metrics-behind-kube-rbac-proxy): every component of ours — both Deployments here and the
node DaemonSets gpu-controller renders from the chart's configuration — serves /metrics on loopback only,
behind an HTTPS kube-rbac-proxy sidecar that lets through a token allowed get /metrics; the probes pass
through the proxy; Services and the ServiceMonitor use HTTPS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testutil.unit.charts.chart_render import (
    RELEASE,
    SERVICE_MONITOR_API,
    find,
    node_daemon_sets,
    of,
    one,
    render,
)

PREFIX = f"{RELEASE}-gpu-control-plane"
DEFAULTS = {"metricsProxy.enabled": True}  # what values.yaml says; the shared helper turns it off
OWN_PORTS = {"gpu-controller": 8080, "gpu-dra-controller": 8080, "gpu-node-agent": 9478, "gpu-handler": 8080}


def pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The Pod templates of our four components, by component."""
    found = {
        c: one(of(docs, c), "Deployment")["spec"]["template"]["spec"]
        for c in ("gpu-controller", "gpu-dra-controller")
    }
    for component, daemon_set in node_daemon_sets(docs).items():
        if component in OWN_PORTS:
            found[component] = daemon_set["spec"]["template"]["spec"]
    return found


def test_every_component_serves_metrics_only_through_the_proxy(helm: Path) -> None:
    docs = render(helm, DEFAULTS)
    rendered = pods(docs)
    assert set(rendered) == set(OWN_PORTS)
    for component, pod in rendered.items():
        main, proxy = pod["containers"]
        port = OWN_PORTS[component]
        assert (main["name"], proxy["name"]) == (component, "kube-rbac-proxy")
        assert f"--metrics-bind-address=127.0.0.1:{port}" in main["args"], component
        assert not main.get("ports"), f"{component} still exposes its own port"
        assert proxy["args"] == [
            "--secure-listen-address=0.0.0.0:8443",
            f"--upstream=http://127.0.0.1:{port}/",
            "--ignore-paths=/healthz,/readyz",
        ], component
        assert proxy["ports"] == [{"name": "https-metrics", "containerPort": 8443, "protocol": "TCP"}]
        assert proxy["image"] == "quay.io/brancz/kube-rbac-proxy:v0.19.1"
        security = proxy["securityContext"]
        assert (security["runAsNonRoot"], security["runAsUser"]) == (True, 65532), component
        assert security["readOnlyRootFilesystem"]
        assert not security["allowPrivilegeEscalation"]
        for probe in ("livenessProbe", "readinessProbe"):
            assert main[probe]["httpGet"]["port"] == 8443, (component, probe)  # the sidecar's
            assert main[probe]["httpGet"]["scheme"] == "HTTPS", (component, probe)


def test_services_and_the_service_monitor_speak_https(helm: Path) -> None:
    docs = render(
        helm,
        {**DEFAULTS, "controller.metrics.serviceMonitor.enabled": True},
        api_versions=(SERVICE_MONITOR_API,),
    )
    for component in ("gpu-controller", "gpu-dra-controller"):
        service = one(of(docs, component), "Service")
        assert service["spec"]["ports"] == [
            {"name": "https-metrics", "port": 8443, "targetPort": "https-metrics", "protocol": "TCP"}
        ]
    [monitor] = find(docs, "ServiceMonitor")
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https-metrics"
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_a_reader_role_to_bind_and_the_proxies_may_review_tokens(helm: Path) -> None:
    docs = render(helm, DEFAULTS)
    roles = {d["metadata"]["name"]: d for d in find(docs, "ClusterRole")}
    assert roles[f"{PREFIX}-metrics-reader"]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert roles[f"{PREFIX}-metrics-auth"]["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]
    bindings = {d["metadata"]["name"]: d for d in find(docs, "ClusterRoleBinding")}
    assert f"{PREFIX}-metrics-reader" not in bindings, "the chart must not pick who reads metrics"
    subjects = {s["name"] for s in bindings[f"{PREFIX}-metrics-auth"]["subjects"]}
    assert subjects == {f"{PREFIX}-{c}" for c in OWN_PORTS}


def test_off_leaves_each_component_its_own_plain_endpoint(helm: Path) -> None:
    docs = render(helm, {"metricsProxy.enabled": False})
    for component, pod in pods(docs).items():
        assert [c["name"] for c in pod["containers"]] == [component]
    assert not [d for d in find(docs, "ClusterRole") if "metrics" in d["metadata"]["name"]]
