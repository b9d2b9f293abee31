"""The chart release the chart install tests share: rendered with ``helm template``, applied to the
real API server into the test's namespace under a release name of its own (the ``release`` fixture)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pkg.devcluster.cluster import ControlPlane, default_bin_dir

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "gpu-control-plane"
LEASE_NAME = "gpu-controller-leader"
DRA_LEASE_NAME = "gpu-dra-controller-leader"
LEDGER_NAME = "gpu-dra-allocation-ledger"
# No node has this label, so the Deployment's Pods are never bound to a node without a kubelet.
UNSCHEDULABLE = {
    "controller.nodeSelector": {"gpu-control-plane.test/never": "true"},
    "draController.nodeSelector": {"gpu-control-plane.test/never": "true"},
    "nodeAgent.nodeSelector": {"gpu-control-plane.test/never": "true"},
    "gpuHandler.nodeSelector": {"gpu-control-plane.test/never": "true"},
    "validator.nodeSelector": {"gpu-control-plane.test/never": "true"},
    "dcgm.nodeSelector": {"gpu-control-plane.test/never": "true"},
    "dcgmExporter.nodeSelector": {"gpu-control-plane.test/never": "true"},
}
COMPONENTS = ("gpu-node-agent", "gpu-validator", "gpu-handler", "nv-hostengine", "dcgm-exporter")


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    service_account: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def helm_template(
    release: str, namespace: str, values: dict[str, Any], *, api_versions: tuple[str, ...] = ()
) -> str:
    args = [str(default_bin_dir() / "helm"), "template", release, str(CHART), "--namespace", namespace]
    for path, value in values.items():
        args += ["--set-json", f"{path}={json.dumps(value)}"]
    for api in api_versions:
        args += ["--api-versions", api]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def impersonate(release: Release) -> list[str]:
    """``--as`` flags for the account with the groups its token would carry."""
    return [
        f"--as={release.user}",
        "--as-group=system:serviceaccounts",
        f"--as-group=system:serviceaccounts:{release.namespace}",
        "--as-group=system:authenticated",
    ]


@pytest.fixture
def release(control_plane: ControlPlane, namespace: str, unique: str) -> Iterator[Release]:
    name = f"gcp-{unique}"
    installed = Release(
        name=name, namespace=namespace, service_account=f"{name}-gpu-control-plane-gpu-controller"
    )
    try:
        # Everything the chart renders by default, CRDs included, passes the server's validation and
        # admission. A dry run: the session's CRDs stay as the conftest applied them.
        control_plane.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            f"--field-manager=helm-{name}",
            "-f",
            "-",
            input_text=helm_template(name, namespace, {"crds.install": True, **UNSCHEDULABLE}),
        )
        control_plane.kubectl(
            "apply",
            "--server-side",
            f"--field-manager=helm-{name}",
            "-f",
            "-",
            input_text=helm_template(name, namespace, {"crds.install": False, **UNSCHEDULABLE}),
        )
        yield installed
    finally:
        control_plane.kubectl(
            "delete",
            "clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
            "-l",
            f"app.kubernetes.io/instance={name}",
            "--ignore-not-found",
            "--wait=false",
        )
