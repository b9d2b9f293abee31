"""A ServiceMonitor per component (``<component>.metrics.serviceMonitor``): each selects exactly its
component's metrics Service, whose endpoints are that component's Pods; the node components get a
headless Service made with the monitor; honorLabels where the series carry the workload's or the
node's own labels (docs/who-uses-our-gpus.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import (
    NAMESPACE,
    RELEASE,
    SERVICE_MONITOR_API,
    find,
    install_notes,
    node_daemon_sets,
    of,
    one,
    render,
)

KEYS = {
    "gpu-controller": "controller",
    "gpu-dra-controller": "draController",
    "gpu-node-agent": "nodeAgent",
    "gpu-handler": "gpuHandler",
}
HONOR_LABELS = {"gpu-dra-controller", "gpu-node-agent", "gpu-handler"}
ALL_ON = {f"{key}.metrics.serviceMonitor.enabled": True for key in KEYS.values()}


def pod_template(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    nodes = node_daemon_sets(docs)
    workload = nodes[component] if component in nodes else one(of(docs, component), "Deployment")
    return dict(workload["spec"]["template"])


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


@pytest.mark.parametrize("proxy", [True, False])
def test_each_monitor_reaches_exactly_its_components_pods(helm: Path, proxy: bool) -> None:
    docs = render(helm, {**ALL_ON, "metricsProxy.enabled": proxy}, api_versions=(SERVICE_MONITOR_API,))
    monitors = {
        m["metadata"]["labels"]["app.kubernetes.io/component"]: m for m in find(docs, "ServiceMonitor")
    }
    assert set(monitors) == set(KEYS)
    services = find(docs, "Service")
    for component, monitor in monitors.items():
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        chosen = [
            s
            for s in services
            if matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert len(chosen) == 1, (component, [s["metadata"]["name"] for s in chosen])
        [service] = chosen
        template = pod_template(docs, component)
        assert matches(service["spec"]["selector"], template["metadata"]["labels"]), component
        for other in set(KEYS) - {component}:
            assert not matches(service["spec"]["selector"], pod_template(docs, other)["metadata"]["labels"])
        [endpoint] = monitor["spec"]["endpoints"]
        [port] = service["spec"]["ports"]
        assert endpoint["port"] == port["name"] == ("https-metrics" if proxy else "metrics")
        container_ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert port["targetPort"] in container_ports, component
        assert endpoint.get("honorLabels", False) == (component in HONOR_LABELS), component
        assert ("bearerTokenFile" in endpoint) == proxy
        if component in ("gpu-node-agent", "gpu-handler"):
            assert service["spec"]["clusterIP"] == "None"  # every Pod of the DaemonSet a target


def test_monitors_follow_their_switch_the_component_and_the_api(helm: Path) -> None:
    docs = render(
        helm, {"draController.metrics.serviceMonitor.enabled": True}, api_versions=(SERVICE_MONITOR_API,)
    )
    assert [m["metadata"]["name"] for m in find(docs, "ServiceMonitor")] == [
        f"{RELEASE}-gpu-control-plane-gpu-dra-controller"
    ]
    docs = render(
        helm,
        {**ALL_ON, "gpuHandler.enabled": False, "draController.enabled": False},
        api_versions=(SERVICE_MONITOR_API,),
    )
    assert {m["metadata"]["labels"]["app.kubernetes.io/component"] for m in find(docs, "ServiceMonitor")} == {
        "gpu-controller",
        "gpu-node-agent",
    }
    docs = render(helm, ALL_ON)  # the cluster serves no ServiceMonitor: neither monitors nor their Services
    assert find(docs, "ServiceMonitor") == []
    assert not [
        s
        for s in find(docs, "Service")
        if s["metadata"]["name"].endswith(("-gpu-handler-metrics", "-gpu-node-agent-metrics"))
    ]


def test_notes_name_every_monitor_that_could_not_be_created(helm: Path) -> None:
    asked = ("draController.metrics.serviceMonitor.enabled", "gpuHandler.metrics.serviceMonitor.enabled")
    notes = install_notes(helm, dict.fromkeys(asked, True))
    assert f"WARNING: ServiceMonitors were asked for ({', '.join(asked)})" in notes


def test_the_amd_handler_gets_its_own_service_and_monitor(helm: Path) -> None:
    docs = render(
        helm,
        {"gpuHandler.amd.enabled": True, "gpuHandler.metrics.serviceMonitor.enabled": True},
        api_versions=(SERVICE_MONITOR_API,),
    )
    monitors = {
        m["metadata"]["labels"]["app.kubernetes.io/component"]: m for m in find(docs, "ServiceMonitor")
    }
    assert set(monitors) == {"gpu-handler", "gpu-handler-amd"}
    services = find(docs, "Service")
    for component, monitor in monitors.items():
        [service] = [
            s
            for s in services
            if matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert matches(service["spec"]["selector"], pod_template(docs, component)["metadata"]["labels"])
        other = ({"gpu-handler", "gpu-handler-amd"} - {component}).pop()
        assert not matches(service["spec"]["selector"], pod_template(docs, other)["metadata"]["labels"])
