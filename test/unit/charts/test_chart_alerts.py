"""The chart's alerts, checked by promtool: the rendered PrometheusRule's groups pass `promtool check
rules`, and `promtool test rules` (alerts/alerts-test.yaml) shows each alert firing on the failure it
names, after its `for`, and staying quiet on healthy series."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.unit.charts.chart_render import (
    PROMETHEUS_RULE_API,
    find,
    render,
    template_text,
)

from pkg.devcluster.cluster import default_bin_dir

HERE = Path(__file__).parent
ALERTS = {
    "GPUNotDriverReady",
    "GPUHardwareUnhealthy",
    "GPUPrepareFailures",
    "GPUAllocationFailures",
    "GPUPublisherErrors",
    "GPUComponentDown",
    "GPUControllerAbsent",
}


@pytest.fixture(scope="module")
def promtool() -> Path:
    path = default_bin_dir() / "promtool"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make tools` (hack/tools/prometheus)")
    return path


def rule_groups(helm: Path) -> dict[str, Any]:
    """The rule's spec for release "gpucp" (the name the promtool test's series carry)."""
    text = template_text(helm, {"alerts.enabled": True}, api_versions=(PROMETHEUS_RULE_API,), release="gpucp")
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    # Beside it, with monitoring.recordingRules (on by default): the recording rules' own.
    [rule] = alert_rules(docs)
    return dict(rule["spec"])


def alert_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The alerts' PrometheusRule (the recording rules have one of their own: monitoring.*)."""
    return [d for d in find(docs, "PrometheusRule") if d["metadata"]["name"].endswith("-alerts")]


def test_the_rule_is_rendered_only_where_prometheus_rules_are_served(helm: Path) -> None:
    assert not alert_rules(render(helm, {"alerts.enabled": True}))
    assert not alert_rules(render(helm, {}, api_versions=(PROMETHEUS_RULE_API,)))
    names = {r["alert"] for g in rule_groups(helm)["groups"] for r in g["rules"]}
    assert names == ALERTS


def test_promtool_checks_and_tests_the_alerts(helm: Path, promtool: Path, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(helm)))
    shutil.copy(HERE / "alerts" / "alerts-test.yaml", tmp_path)
    check = subprocess.run(
        [promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run(
        [promtool, "test", "rules", "alerts-test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert test.returncode == 0, test.stdout + test.stderr
    tested = {
        case["alertname"]
        for t in yaml.safe_load((HERE / "alerts" / "alerts-test.yaml").read_text())["tests"]
        for case in t["alert_rule_test"]
    }
    assert tested == ALERTS
