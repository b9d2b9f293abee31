"""The chart's ServiceMonitors and PrometheusRules against the Prometheus Operator's own CRDs.

The CRDs are the operator's (``example/prometheus-operator-crd/`` of its module, pinned by
``hack/tools/prometheus-operator``; ``make tools`` copies them beside the binaries). Applied with
strict field validation, an object whose fields the operator's schema does not know is refused
instead of silently pruned, so what Prometheus would be configured with is what we render.

Before the CRDs are installed, ``helm install --dry-run=server`` against the same API server (the
chart asks the cluster what it serves) renders no monitor or rule and NOTES says why; after, the
monitors and rules are rendered and NOTES names them. The CRDs are removed at the end of the
module: no other test of the session sees them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.integration.chart_install import CHART, UNSCHEDULABLE, helm_template

from pkg.devcluster.cluster import ControlPlane, default_bin_dir

MONITORING = "monitoring.coreos.com"
KINDS = ("ServiceMonitor", "PrometheusRule")
# Every monitor, the alerts and the recording rules (on by default).
MONITORS_ON: dict[str, Any] = {
    **{
        f"{key}.metrics.serviceMonitor.enabled": True
        for key in ("controller", "draController", "nodeAgent", "gpuHandler")
    },
    "alerts.enabled": True,
}


def _crd_dir() -> Path:
    folder = default_bin_dir() / "prometheus-operator-crd"
    assert folder.is_dir(), f"{folder} is missing: run `make tools`"
    return folder


def _dry_run_install(plane: ControlPlane, name: str, namespace: str) -> tuple[list[dict[str, Any]], str]:
    """``helm install --dry-run=server`` with every monitor asked for: its objects and NOTES."""
    args = [str(default_bin_dir() / "helm"), "install", name, str(CHART), "--namespace", namespace]
    args += ["--kubeconfig", str(plane.kubeconfig), "--dry-run=server", "--output", "json"]
    for path, value in {**MONITORS_ON, **UNSCHEDULABLE, "crds.install": False}.items():
        args += ["--set-json", f"{path}={json.dumps(value)}"]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    release = json.loads(result.stdout)
    docs = [doc for doc in yaml.safe_load_all(release["manifest"]) if doc]
    return docs, str(release["info"]["notes"])


@dataclass(frozen=True)
class OperatorCrds:
    names: list[str]
    before: tuple[list[dict[str, Any]], str]  # a server-side dry run's objects and NOTES without them


@pytest.fixture(scope="module")
def operator_crds(control_plane: ControlPlane) -> Iterator[OperatorCrds]:
    """Every CRD of the operator, established (and a dry-run install made just before); deleted
    afterwards."""
    served = control_plane.kubectl("api-resources", f"--api-group={MONITORING}", "-o", "name").split()
    assert served == []  # the session's server holds none of them yet
    before = _dry_run_install(control_plane, "gcp-before-crds", "default")
    files = sorted(_crd_dir().glob("*.yaml"))
    # <group>_<plural>.yaml, as controller-gen names them (PyYAML cannot load them: `- =`, YAML
    # 1.1's value key, is a plain string in the 1.2 the API server reads).
    names = [".".join(reversed(f.stem.split("_", 1))) for f in files]
    # Server-side: the largest of them are over the size client-side apply's annotation allows.
    args = ["apply", "--server-side", "--field-manager=prometheus-operator"]
    control_plane.kubectl(*args, *(arg for f in files for arg in ("-f", str(f))))
    try:
        control_plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in names)
        )
        yield OperatorCrds(names=names, before=before)
    finally:
        control_plane.kubectl("delete", "crd", *names, "--ignore-not-found", "--wait=false")


def test_without_the_operators_crds_nothing_is_rendered_and_notes_say_why(
    operator_crds: OperatorCrds,
) -> None:
    docs, notes = operator_crds.before

    assert [d["kind"] for d in docs if d["kind"] in KINDS] == []
    assert "WARNING: ServiceMonitors were asked for (controller.metrics.serviceMonitor.enabled, " in notes
    assert "the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor" in notes


@pytest.mark.parametrize("proxy", [True, False], ids=["through-kube-rbac-proxy", "plain-http"])
def test_the_charts_monitors_and_rules_are_accepted_whole_by_the_operators_crds(
    control_plane: ControlPlane, namespace: str, unique: str, operator_crds: OperatorCrds, proxy: bool
) -> None:
    assert f"servicemonitors.{MONITORING}" in operator_crds.names
    assert f"prometheusrules.{MONITORING}" in operator_crds.names
    name = f"gcp-{unique}"
    rendered = helm_template_with_monitoring(name, namespace, {"metricsProxy.enabled": proxy})
    ours = [d for d in rendered if d["kind"] in KINDS]
    assert sorted(d["metadata"]["name"] for d in ours) == sorted(
        [
            f"{name}-gpu-control-plane-gpu-controller",
            f"{name}-gpu-control-plane-gpu-dra-controller",
            f"{name}-gpu-control-plane-gpu-node-agent",
            f"{name}-gpu-control-plane-gpu-handler",
            f"{name}-gpu-control-plane-alerts",
            f"{name}-gpu-control-plane-recording-rules",
        ]
    )

    # Strict: a field the operator's schema lacks is an error, not a silent prune.
    control_plane.kubectl(
        "apply",
        "--server-side",
        "--validate=strict",
        f"--field-manager=helm-{name}",
        "-n",
        namespace,
        "-f",
        "-",
        input_text=yaml.safe_dump_all(ours),
    )

    for doc in ours:
        kind, object_name = doc["kind"], doc["metadata"]["name"]
        stored = json.loads(
            control_plane.kubectl(
                "get", f"{kind.lower()}s.{MONITORING}", object_name, "-n", namespace, "-o", "json"
            )
        )
        assert stored["spec"] == doc["spec"], f"the server changed {kind} {object_name}"


def test_with_the_operators_crds_a_server_side_install_renders_them_and_notes_name_them(
    control_plane: ControlPlane, namespace: str, unique: str, operator_crds: OperatorCrds
) -> None:
    docs, notes = _dry_run_install(control_plane, f"gcp-{unique}", namespace)

    kinds = sorted(d["kind"] for d in docs if d["kind"] in KINDS)
    assert kinds == ["PrometheusRule"] * 2 + ["ServiceMonitor"] * 4
    assert "ServiceMonitors scrape the metrics of: controller, draController, nodeAgent, gpuHandler." in notes
    assert "WARNING" not in notes


def helm_template_with_monitoring(name: str, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart as rendered for a cluster that serves the operator's kinds, every monitor on."""
    text = helm_template(
        name,
        namespace,
        {**MONITORS_ON, **UNSCHEDULABLE, "crds.install": False, **values},
        api_versions=tuple(f"{MONITORING}/v1/{kind}" for kind in KINDS),
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]
