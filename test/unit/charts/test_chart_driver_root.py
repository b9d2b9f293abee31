"""One driver root for the validator and gpu-handler, and the renamed values refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import CHART, node_daemon_sets, render, run_helm, set_flags


def _mounted(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Mount path → host path of ``container``'s hostPath volumes."""
    hosts = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    return {m["mountPath"]: hosts[m["name"]] for m in container.get("volumeMounts", []) if m["name"] in hosts}


def test_the_driver_root_reaches_the_validator_and_the_kubelet_plugin(helm: Path) -> None:
    sets = node_daemon_sets(render(helm, {"driverRoot": "/run/nvidia/driver"}))
    validator = sets["gpu-validator"]["spec"]["template"]["spec"]
    assert _mounted(validator, validator["initContainers"][0])["/run/nvidia/driver"] == "/run/nvidia/driver"
    handler = sets["gpu-handler"]["spec"]["template"]["spec"]
    [main] = handler["containers"]
    assert "--driver-root-on-host=/run/nvidia/driver" in main["args"]
    assert _mounted(handler, main)["/host/driver-root"] == "/run/nvidia/driver"


def test_a_driver_on_the_hosts_root_is_not_mounted_twice_into_the_validator(helm: Path) -> None:
    validator = node_daemon_sets(render(helm))["gpu-validator"]["spec"]["template"]["spec"]
    assert [v["name"] for v in validator["volumes"]] == ["host-root"]  # the driver is under /host
    handler = node_daemon_sets(render(helm))["gpu-handler"]["spec"]["template"]["spec"]
    assert "--driver-root-on-host=/" in handler["containers"][0]["args"]


@pytest.mark.parametrize("old", ["validator.driverRoot", "gpuHandler.kubeletPlugin.driverRoot"])
def test_a_renamed_driver_root_value_fails_naming_the_new_one(helm: Path, old: str) -> None:
    args = ["template", "rel", str(CHART), *set_flags({old: "/run/nvidia/driver"})]
    result = run_helm(helm, *args, check=False)
    assert result.returncode != 0
    assert f"{old} was renamed: set the top-level driverRoot instead" in result.stderr


def test_the_capabilities_default_to_all_and_a_list_is_passed_on(helm: Path) -> None:
    def args(values: dict[str, Any]) -> list[str]:
        handler = node_daemon_sets(render(helm, values))["gpu-handler"]["spec"]["template"]["spec"]
        return [a for a in handler["containers"][0]["args"] if a.startswith("--driver-capabilities")]

    assert args({}) == ["--driver-capabilities=all"]
    listed = {"gpuHandler.kubeletPlugin.driverCapabilities": ["compute", "utility"]}
    assert args(listed) == ["--driver-capabilities=compute,utility"]
