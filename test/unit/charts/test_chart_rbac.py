"""gpu-controller's RBAC in the chart: exactly the calls it makes, no wildcard, its Lease Role only
with leader election, bound to its ServiceAccount."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import (
    CONTROLLER_CLUSTER_PERMISSIONS,
    CONTROLLER_NODE_COMPONENT_RULES,
    NAMESPACE,
    container,
    env_of,
    find,
    flag,
    granted_by,
    leader_election,
    of,
    one,
    render,
)


def rbac_roles(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from find(docs, "ClusterRole")
    yield from find(docs, "Role")


@pytest.mark.parametrize("replicas", [1, 2])
def test_rbac_has_no_wildcards(helm: Path, replicas: int) -> None:
    docs = render(helm, {"controller.replicas": replicas})
    for role in rbac_roles(docs):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                for entry in rule.get(field, []):
                    assert "*" not in entry, f"{role['kind']} {role['metadata']['name']}: {field} {entry!r}"
        assert "aggregationRule" not in role


def test_cluster_role_grants_exactly_the_controller_calls(default_docs: list[dict[str, Any]]) -> None:
    assert (
        granted_by(one(of(default_docs, "gpu-controller"), "ClusterRole")) == CONTROLLER_CLUSTER_PERMISSIONS
    )


def test_node_components_role_is_exactly_the_controller_calls_in_its_namespace(
    default_docs: list[dict[str, Any]],
) -> None:
    (role,) = [
        r
        for r in find(of(default_docs, "gpu-controller"), "Role")
        if r["metadata"]["name"].endswith("-node-components")
    ]
    assert role["metadata"]["namespace"] == NAMESPACE
    rules = sorted(
        (
            tuple(rule["apiGroups"]),
            tuple(rule["resources"]),
            tuple(sorted(rule["verbs"])),
            tuple(rule["resourceNames"]) if "resourceNames" in rule else None,
        )
        for rule in role["rules"]
    )
    assert rules == CONTROLLER_NODE_COMPONENT_RULES
    # The ConfigMap it may read is the one the chart creates and names in --operator-config.
    assert (
        flag(default_docs, "operator-config")
        == one(of(default_docs, "node-components"), "ConfigMap")["metadata"]["name"]
    )


def test_lease_role_is_one_lease_in_the_release_namespace(default_docs: list[dict[str, Any]]) -> None:
    role = leader_election(default_docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    lease = flag(default_docs, "leader-election-id")
    assert lease == "gpu-controller-leader"
    rules = sorted(
        (rule["apiGroups"], rule["resources"], sorted(rule["verbs"]), rule.get("resourceNames"))
        for rule in role["rules"]
    )
    assert rules == [
        (["coordination.k8s.io"], ["leases"], ["create"], None),
        (["coordination.k8s.io"], ["leases"], ["get", "update"], [lease]),
    ]
    # The Lease lives in the Pod's namespace: --leader-election-namespace defaults to POD_NAMESPACE.
    assert env_of(default_docs)["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert not any(arg.startswith("--leader-election-namespace") for arg in container(default_docs)["args"])


def test_bindings_bind_the_roles_to_the_deployment_service_account(
    default_docs: list[dict[str, Any]],
) -> None:
    docs = of(default_docs, "gpu-controller")
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    pairs = [(one(docs, "ClusterRoleBinding"), one(docs, "ClusterRole"))]
    for suffix in ("-leader-election", "-node-components"):
        (binding,) = [b for b in find(docs, "RoleBinding") if b["metadata"]["name"].endswith(suffix)]
        (role,) = [r for r in find(docs, "Role") if r["metadata"]["name"].endswith(suffix)]
        pairs.append((binding, role))
    for binding, role in pairs:
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role["kind"],
            "name": role["metadata"]["name"],
        }
