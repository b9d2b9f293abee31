"""builtin_kinds builds each kind on first use (docs/allocator.md, "The plugin's start"): the
constants read as before, and importing the module imports no model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kubernetes.client import ResourceV1ResourceClaim, V1Pod

from pkg.framework.client import builtin_kinds
from pkg.framework.client.kinds import ResourceKind


def test_a_kind_is_the_declared_one_and_built_once() -> None:
    from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

    declared = ResourceKind(group="", version="v1", kind="Pod", plural="pods", namespaced=True, model=V1Pod)
    assert declared == POD
    assert RESOURCE_CLAIM.model is ResourceV1ResourceClaim
    assert RESOURCE_CLAIM.collection_path("ns") == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
    assert builtin_kinds.POD is POD  # kept: later uses are the same object


def test_an_unknown_kind_is_an_error() -> None:
    with pytest.raises(ImportError):
        from pkg.framework.client.builtin_kinds import PODS  # type: ignore[attr-defined]  # noqa: F401
    with pytest.raises(AttributeError):
        builtin_kinds.NOT_A_KIND  # type: ignore[attr-defined]  # noqa: B018
    assert {"NODE", "POD", "RESOURCE_SLICE"} <= set(dir(builtin_kinds))


def test_importing_the_module_imports_no_model() -> None:
    probe = (
        "import sys\nfrom pkg.framework.client import builtin_kinds\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes.client.models.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
