"""values.yaml: every value is documented, changes the output of some template, is in README.md, and
the schema refuses bad values."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.unit.charts.chart_render import (
    CHART,
    OPAQUE_VALUES,
    PROMETHEUS_RULE_API,
    README,
    RELEASE,
    SERVICE_MONITOR_API,
    VALUES_FILE,
    run_helm,
    set_flags,
    template_text,
)


def load_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(VALUES_FILE.read_text(encoding="utf-8"))
    return values


def value_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(dotted path, default, is_section) for every key; sections are non-empty maps of settings."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in OPAQUE_VALUES:
            yield path, value, True
            yield from value_paths(value, f"{path}.")
        else:
            yield path, value, False


LEAF_VALUES = {path: value for path, value, section in value_paths(load_values()) if not section}


ALL_KEYS = [path for path, _, _ in value_paths(load_values())]


def test_every_key_has_a_comment_above_it() -> None:
    """Each setting and section is introduced by a comment at its own indentation; keys inside an
    opaque value (Kubernetes fields) are covered by the comment of the value."""
    lines = VALUES_FILE.read_text(encoding="utf-8").splitlines()
    key_line = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):")
    stack: list[tuple[int, str]] = []
    seen: list[str] = []
    for number, line in enumerate(lines):
        match = key_line.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = ".".join(key for _, key in stack)
        path = f"{parent}.{match['key']}" if parent else match["key"]
        stack.append((indent, match["key"]))
        if any(path.startswith(f"{opaque}.") for opaque in OPAQUE_VALUES):
            continue
        seen.append(path)
        previous = lines[number - 1] if number else ""
        assert previous.startswith(" " * indent + "# "), (
            f"values.yaml:{number + 1}: {path} has no comment above it"
        )
    assert seen == ALL_KEYS


def mutate(path: str, value: Any) -> Any:
    """A different value of the same type that the schema accepts."""
    special = {
        "image.pullPolicy": "Always",
        "controller.controllers": "*,-nodelabels",
        "logging.level": "Warn",
        "logging.output": "stdout" if value == "stderr" else "stderr",
        "imagePullSecrets": [{"name": "registry"}],
        "controller.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "controller.metrics.serviceMonitor.interval": "1m",
        "draController.metrics.serviceMonitor.interval": "1m",
        "nodeAgent.metrics.serviceMonitor.interval": "1m",
        "gpuHandler.metrics.serviceMonitor.interval": "1m",
        "draController.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "nodeAgent.resyncPeriod": "1m",
        "nodeAgent.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "validator.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "validator.pullPolicy": "Always",
        "validator.command": ["sh"],
        "validator.args": ["validate"],
        "validator.env": [{"name": "WITH_WAIT", "value": "true"}],
        "validator.readinessCommand": ["true"],
        "gpuHandler.enrichPeriod": "1m",
        "gpuHandler.attribution.interval": "1m",
        "gpuHandler.attribution.usageStatusInterval": "1m",
        "gpuHandler.publishResyncPeriod": "1m",
        "gpuHandler.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "dcgm.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "dcgm.pullPolicy": "Always",
        "dcgmExporter.tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "dcgmExporter.pullPolicy": "Always",
        "gpuHandler.kubeletPlugin.kubeletRoot": "/srv/kubelet",
        "gpuHandler.kubeletPlugin.cdiDir": "/etc/cdi",
        "gpuHandler.kubeletPlugin.mpsRoot": "/var/run/mps",
        "gpuHandler.kubeletPlugin.lockTimeout": "1m",
        "driverRoot": "/usr/local/nvidia",
        "gpuHandler.kubeletPlugin.driverCapabilities": ["compute", "utility", "video"],
        "admissionPolicy.serviceAccounts": [{"name": "gpu-handler"}],
        "simulatedHosts.dir": "/srv/nodes",
        "alerts.labels": {"release": "prometheus"},
        "metricsProxy.pullPolicy": "Always",
        "metricsProxy.resources.requests.cpu": "10m",
        "metricsProxy.resources.requests.memory": "48Mi",
        "metricsProxy.resources.limits.memory": "96Mi",
        "alerts.window": "5m",
        "alerts.driverNotReadyFor": "1h",
        "alerts.hardwareUnhealthyFor": "1h",
        "alerts.allocationFailuresFor": "1h",
        "alerts.publisherErrorsFor": "1h",
        "alerts.componentDownFor": "1h",
        "simulatedHosts.pciIds": "/srv/nodes/pci.ids",
        "monitoring.accountingPeriod": "30s",
        "draController.explanationTTL": "90s",
        "computeDomains.pullPolicy": "Always",
        "computeDomains.command": ["sh"],
        "computeDomains.args": ["-c", "true"],
        "computeDomains.readinessCommand": ["true"],
        "computeDomains.tolerations": [{"key": "dedicated", "operator": "Exists"}],
    }
    if path in special:
        return special[path]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return "mutated"
    if isinstance(value, list):
        return [*value, "mutated"]
    assert isinstance(value, dict), path
    return {**value, "mutated": "yes"}


@pytest.mark.parametrize("path", sorted(LEAF_VALUES))
def test_every_value_changes_the_output(helm: Path, path: str) -> None:
    # A ServiceMonitor's own settings only show once it is rendered.
    base: dict[str, Any] = {}
    if ".metrics.serviceMonitor." in path and not path.endswith(".enabled"):
        base[path.rsplit(".", 1)[0] + ".enabled"] = True
    if path == "simulatedHosts.pciIds":  # used only with simulated hosts
        base["simulatedHosts.dir"] = "/srv/nodes"
    if path.startswith("metricsProxy."):  # the default (on), which the helper turns off
        base["metricsProxy.enabled"] = True
    if path.startswith("gpuViewer.") and path != "gpuViewer.enabled":  # the role is off by default
        base["gpuViewer.enabled"] = True
    if path.startswith("alerts.") and path != "alerts.enabled":
        base["alerts.enabled"] = True
    api = (SERVICE_MONITOR_API, PROMETHEUS_RULE_API)
    before = template_text(helm, base, api_versions=api)
    after = template_text(helm, {**base, path: mutate(path, LEAF_VALUES[path])}, api_versions=api)
    assert before != after, f"{path} is not used by any template"


def test_every_value_is_in_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    missing = [path for path in ALL_KEYS if f"| `{path}` |" not in readme]
    assert missing == [], f"README.md has no table row for {missing}"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"logging.level": "Verbose"}, "/logging/level"),
        ({"logging.output": "file"}, "/logging/output"),
        ({"controller.replicas": 0}, "/controller/replicas"),
        ({"controller.workers": "two"}, "/controller/workers"),
        ({"controller.metrics.port": 70000}, "/controller/metrics/port"),
        ({"controller.replica": 3}, "additional properties 'replica'"),
        ({"crds.install": "yes"}, "/crds/install"),
        ({"nodeAgent.udev": "yes"}, "/nodeAgent/udev"),
        ({"nodeAgent.resyncPeriod": "5 minutes"}, "/nodeAgent/resyncPeriod"),
        ({"nodeAgent.resyncPeriod": "1h30m"}, "/nodeAgent/resyncPeriod"),  # the agent takes one unit
        ({"nodeAgent.metrics.port": 0}, "/nodeAgent/metrics/port"),
        ({"nodeAgent.updateStrategy": {"type": "Recreate"}}, "additional properties 'updateStrategy'"),
        ({"validator.image.tag": ""}, "/validator/image/tag"),
        ({"driverRoot": "usr/local/nvidia"}, "/driverRoot"),
        ({"gpuHandler.kubeletPlugin.driverCapabilities": []}, "/gpuHandler/kubeletPlugin/driverCapabilities"),
        ({"dcgm.port": 0}, "/dcgm/port"),
        ({"dcgmExporter.pullPolicy": "Sometimes"}, "/dcgmExporter/pullPolicy"),
        ({"nodeAgent.hostNetwork": True}, "additional properties 'hostNetwork'"),
        ({"gpuHandler.backend": "Simulated NVIDIA"}, "/gpuHandler/backend"),
        ({"gpuHandler.publish": "yes"}, "/gpuHandler/publish"),
        ({"gpuHandler.enrichPeriod": "a minute"}, "/gpuHandler/enrichPeriod"),
        ({"gpuHandler.publishResyncPeriod": "1h30m"}, "/gpuHandler/publishResyncPeriod"),
        ({"gpuHandler.imexChannels": 2048}, "/gpuHandler/imexChannels"),
        ({"gpuHandler.imexChannels": -1}, "/gpuHandler/imexChannels"),
        ({"gpuHandler.runtimeClassName": "NVIDIA"}, "/gpuHandler/runtimeClassName"),
        ({"admissionPolicy.serviceAccounts": [{"namespace": "gpu"}]}, "/admissionPolicy/serviceAccounts/0"),
        ({"admissionPolicy.serviceAccounts": ["gpu-handler"]}, "/admissionPolicy/serviceAccounts/0"),
    ],
)
def test_schema_rejects_bad_values(helm: Path, values: dict[str, Any], message: str) -> None:
    result = run_helm(helm, "template", RELEASE, str(CHART), *set_flags(values), check=False)
    assert result.returncode != 0
    assert message in result.stderr
