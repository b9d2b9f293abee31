"""The integration tier: one real control plane per test session.

The control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) is started once,
our CRDs are applied, and every test gets its own namespace and a unique name prefix, so tests can
share the server without seeing each other's objects. When a test fails, the components' logs are
copied to ``test-artifacts/<test>/`` for CI to keep.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import V1Namespace, V1ObjectMeta

from pkg.devcluster.cluster import ControlPlane, ControlPlaneConfig, default_bin_dir
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import NAMESPACE, SERVICE_ACCOUNT
from pkg.framework.client.config import new_api_client

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "test/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    work_dir = Path(tempfile.mkdtemp(prefix="gpu-cp-"))
    plane = ControlPlane(ControlPlaneConfig(bin_dir=default_bin_dir(), work_dir=work_dir))
    plane.start()
    try:
        plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if getattr(report, "failed", False) and "control_plane" in getattr(item, "fixturenames", ()):
        plane = item.funcargs.get("control_plane") if hasattr(item, "funcargs") else None
        if isinstance(plane, ControlPlane):
            target = ARTIFACTS / item.name
            target.mkdir(parents=True, exist_ok=True)
            for name, path in plane.logs().items():
                if path.exists():
                    shutil.copy(path, target / f"{name}.log")
    return report


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> str:
    return str(control_plane.kubeconfig)


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> KubeClient:
    return KubeClient(new_api_client(kubeconfig), field_manager="gpu-control-plane-tests")


@pytest.fixture
def unique() -> str:
    """A short unique suffix for names of cluster-scoped objects made by one test."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def namespace(kube: KubeClient, unique: str, control_plane: ControlPlane) -> Iterator[str]:
    name = f"t-{unique}"
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=name)))
    # Pods are admitted only once the namespace's default service account exists.
    wait_until(lambda: _exists(kube, name), timeout=30, what=f"service account default in {name}")
    yield name
    with contextlib.suppress(NotFoundError):
        kube.delete(NAMESPACE, name)


def _exists(kube: KubeClient, namespace: str) -> bool:
    try:
        kube.get(SERVICE_ACCOUNT, "default", namespace)
    except NotFoundError:
        return False
    return True
