"""A namespace user of ``kubectl gpu``, shared by the integration and e2e tiers.

The user is a ServiceAccount bound in one namespace to the rules Kubernetes' ``view`` role
aggregates (``system:aggregate-to-view``: the test control planes run no clusterrole-aggregation
controller, so ``view`` itself has no rules there), with a kubeconfig of its own — a TokenRequest
token and the cluster's CA — as a namespace user on a laptop has. :func:`bind_viewer_role` applies
the chart's ``gpuViewer`` ClusterRole for the user's group, which ``kubectl gpu explain`` needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes.client import V1ObjectMeta, V1ServiceAccount

from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.framework.client import KubeClient
from testutil.extra_kinds import SERVICE_ACCOUNT

EXECUTABLE = Path(sys.executable).parent / "kubectl-gpu"
CHART = Path(__file__).resolve().parents[2] / "charts" / "gpu-control-plane"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class User:
    kubeconfig: Path
    namespace: str
    group: str  # the group its token carries that no other test's user has

    def run(self, *args: str, command: tuple[str, ...] = (str(EXECUTABLE),)) -> Run:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {
            "KUBECONFIG": str(self.kubeconfig)
        }
        result = subprocess.run(
            [*command, *args], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert "Traceback" not in result.stderr, result.stderr
        return Run(result.returncode, result.stdout, result.stderr)


def namespace_user(kube: KubeClient, control_plane: ControlPlane, namespace: str, folder: Path) -> User:
    """A ServiceAccount with ``view`` in ``namespace`` only, and a kubeconfig naming that namespace."""
    kube.create(
        SERVICE_ACCOUNT, V1ServiceAccount(metadata=V1ObjectMeta(name="gpu-user", namespace=namespace))
    )
    control_plane.kubectl(
        "create", "rolebinding", "gpu-user-view", "--clusterrole=system:aggregate-to-view",
        f"--serviceaccount={namespace}:gpu-user", "-n", namespace,
    )  # fmt: skip
    token = control_plane.kubectl("create", "token", "gpu-user", "-n", namespace, "--duration=1h").strip()
    admin = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    path = folder / "user-kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
                "users": [{"name": "gpu-user", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "laptop",
                        "context": {"cluster": "local", "user": "gpu-user", "namespace": namespace},
                    }
                ],
                "current-context": "laptop",
            }
        )
    )
    return User(path, namespace, f"system:serviceaccounts:{namespace}")


def viewer_manifest(release: str, group: str) -> str:
    """The chart's gpuViewer ClusterRole and its binding to ``group``, rendered by helm."""
    values = {"gpuViewer.enabled": True, "gpuViewer.groups": [group], "metricsProxy.enabled": False}
    args = [str(default_bin_dir() / "helm"), "template", release, str(CHART), "--namespace", "gpu-system"]
    for path, value in values.items():
        args += ["--set-json", f"{path}={json.dumps(value)}"]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    docs = [
        d
        for d in yaml.safe_load_all(result.stdout)
        if d and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "gpu-viewer"
    ]
    assert [d["kind"] for d in docs] == ["ClusterRole", "ClusterRoleBinding"]
    return yaml.safe_dump_all(docs)


@contextmanager
def bind_viewer_role(control_plane: ControlPlane, user: User, release: str) -> Iterator[None]:
    manifest = viewer_manifest(release, user.group)
    control_plane.kubectl("apply", "-f", "-", input_text=manifest)
    try:
        yield
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input_text=manifest)


def table(text: str) -> list[dict[str, str]]:
    """A kubectl-style table as dicts (cells hold no spaces in these tests)."""
    header, *lines = text.splitlines()
    names = header.split()
    return [dict(zip(names, line.split(), strict=True)) for line in lines]
