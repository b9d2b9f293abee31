"""The integration tier: one real control plane per test session.

The control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) is started once
and our CRDs are applied; its Nodes have no kubelet (``dra_objects.create_ready_node``). The
fixtures built on it (client, a namespace per test, failure logs) are in ``test/conftest.py``.

Which release: the pinned one, unless ``GPU_CP_CONTROL_PLANE_BIN_DIR`` names the folder of another
release's apiserver, scheduler and controller manager (``make test-integration-oldest`` runs the
``dra_api`` tests so against 1.34). ``GPU_CP_KUBERNETES_RELEASE`` then says which release that
folder must hold, and the session refuses to start on any other: a pass meant for 1.34 that
silently ran the pinned binaries again would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pkg.devcluster.cluster import ControlPlane, ControlPlaneConfig, default_bin_dir

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "test/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    work_dir = Path(tempfile.mkdtemp(prefix="gpu-cp-"))
    other_release = os.environ.get("GPU_CP_CONTROL_PLANE_BIN_DIR")
    config = ControlPlaneConfig(
        bin_dir=default_bin_dir(),
        work_dir=work_dir,
        control_plane_bin_dir=Path(other_release) if other_release else None,
    )
    plane = ControlPlane(config)
    expected = os.environ.get("GPU_CP_KUBERNETES_RELEASE")
    if expected and plane.release.name != expected:
        pytest.fail(
            f"the control plane binaries are Kubernetes {plane.release.name}, not {expected} as asked"
        )
    plane.start()
    try:
        plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
