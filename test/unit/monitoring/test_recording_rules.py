"""The chart's recording rules, checked and tested by the real promtool (``make tools`` builds it).

``recording-rules.test.yaml`` feeds synthetic DCGM exporter series and our allocation series
(with a leader change in the middle) to the rule file the chart ships, and states the GPU-hours,
the utilisation by workload and the idle allocations they must record.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from pkg.devcluster.cluster import default_bin_dir

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[2] / "charts" / "gpu-control-plane" / "files" / "prometheus" / "recording-rules.yaml"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = default_bin_dir() / "promtool"
    assert promtool.is_file(), f"{promtool} is missing: run `make tools`"
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, check=False, cwd=HERE, timeout=60
    )


def test_the_rule_file_is_valid() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_recording_rules_on_synthetic_dcgm_series() -> None:
    done = _promtool("test", "rules", "recording-rules.test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The test file is not vacuous: the same inputs with another GPU-hours value fail."""
    wrong = (HERE / "recording-rules.test.yaml").read_text().replace("value: 2", "value: 3")
    wrong = wrong.replace("../../../charts", str(RULES.parents[4] / "charts"))
    path = tmp_path / "wrong.test.yaml"
    path.write_text(wrong)
    done = _promtool("test", "rules", str(path))
    assert done.returncode != 0
    assert "gpu_hours" in done.stdout + done.stderr


def _helm_template(*args: str) -> str:
    helm = default_bin_dir() / "helm"
    assert helm.is_file(), f"{helm} is missing: run `make tools`"
    done = subprocess.run(
        [str(helm), "template", "rel", str(RULES.parents[2]), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def test_the_chart_ships_exactly_the_tested_rule_file() -> None:
    rendered = _helm_template(
        "--api-versions",
        "monitoring.coreos.com/v1/PrometheusRule",
        "-s",
        "templates/prometheus-recording-rules.yaml",
    )
    rule = yaml.safe_load(rendered)
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())


def test_the_dashboard_configmap_holds_the_dashboard_and_queries_recorded_series() -> None:
    rendered = yaml.safe_load(_helm_template("-s", "templates/grafana-dashboard.yaml"))
    assert rendered["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(rendered["data"]["gpu-control-plane.json"])
    shipped = json.loads((RULES.parents[1] / "dashboards" / "gpu-control-plane.json").read_text())
    assert dashboard == shipped
    exprs = " ".join(t["expr"] for panel in dashboard["panels"] for t in panel["targets"])
    recorded = {r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    for name in (
        "gpu_dra:allocation:idle",
        "gpu_dra:namespace_class:gpu_hours:increase1h",
        "gpu_process:namespace_pod:memory_bytes",  # the per-Pod views of shared cards
        "gpu_process:namespace_pod:sm_utilization_ratio",
    ):
        assert name in recorded
        assert name in exprs
    for family in ("gpu_physicalgpu_info", "gpu_physicalgpu_condition", "gpu_dra_prepare_failures_total"):
        assert family in exprs
