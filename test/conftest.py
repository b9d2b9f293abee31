"""Fixtures every tier that talks to a real cluster shares (integration and e2e).

Each tier's own conftest provides the session fixture ``control_plane`` (the integration tier a
plain control plane, the e2e tier one that real nodes join); everything here builds on it: a
client, a fresh namespace per test, a unique suffix for cluster-scoped names. When a test fails,
the logs of every component its fixtures expose (anything with a ``logs()`` mapping of name to
file: the control plane, real nodes, our components) are copied to ``test-artifacts/<test>/``
for CI to keep.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import pytest
from kubernetes.client import V1Namespace, V1ObjectMeta
from testutil.extra_kinds import SERVICE_ACCOUNT

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import NAMESPACE
from pkg.framework.client.config import new_api_client

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"


@runtime_checkable
class LogSource(Protocol):
    """A fixture value whose processes write logs worth keeping when a test fails."""

    def logs(self) -> dict[str, Path]: ...


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if getattr(report, "failed", False):
        for name, path in _component_logs(item).items():
            if path.exists():
                target = ARTIFACTS / item.name
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target / f"{name.replace('/', '_')}.log")
    return report


def _component_logs(item: pytest.Item) -> dict[str, Path]:
    logs: dict[str, Path] = {}
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, ControlPlane | LogSource):
            with contextlib.suppress(Exception):
                logs.update(value.logs())
    return logs


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
