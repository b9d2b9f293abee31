"""The ClusterRole ``kubectl gpu`` users may be given: off by default, read-only, bound only to the
groups the admin names, other namespaces' claims only when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testutil.unit.charts.chart_render import RELEASE, find, granted_by, render

NAME = f"{RELEASE}-gpu-control-plane-gpu-viewer"
READ = {"get", "list", "watch"}


def viewer(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in find(docs, kind) if d["metadata"]["name"] == NAME]


def test_off_by_default(helm: Path) -> None:
    docs = render(helm)
    assert viewer(docs, "ClusterRole") == []
    assert viewer(docs, "ClusterRoleBinding") == []


def test_reads_the_cluster_scoped_objects_kubectl_gpu_needs_and_nothing_else(helm: Path) -> None:
    docs = render(helm, {"gpuViewer.enabled": True})
    (role,) = viewer(docs, "ClusterRole")
    assert granted_by(role) == {
        (group, resource, verb)
        for group, resource in (
            ("resource.k8s.io", "resourceslices"),
            ("resource.k8s.io", "deviceclasses"),
            ("gpu.deckhouse.io", "physicalgpus"),
            ("gpu.deckhouse.io", "gpuclasses"),
        )
        for verb in READ
    }
    assert viewer(docs, "ClusterRoleBinding") == []  # no groups: bound to nobody


def test_bound_to_the_named_groups_and_claims_only_when_asked(helm: Path) -> None:
    docs = render(
        helm,
        {
            "gpuViewer.enabled": True,
            "gpuViewer.groups": ["ml-team", "system:authenticated"],
            "gpuViewer.claimsInAllNamespaces": True,
        },
    )
    (role,) = viewer(docs, "ClusterRole")
    assert {("resource.k8s.io", "resourceclaims", verb) for verb in READ} <= granted_by(role)
    (binding,) = viewer(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": NAME,
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-team"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"},
    ]
