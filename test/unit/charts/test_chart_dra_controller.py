"""The chart's gpu-dra-controller: its Deployment, its exact RBAC and its leader election.

Helpers come from ``chart_render``, the ``helm`` fixture from the conftest (test helpers are imported by bare
name per folder). ``config/rbac/gpu-dra-controller.yaml`` is the chart's ServiceAccount and RBAC
rendered as plain manifests; regenerate it with ``GPU_CP_UPDATE_GENERATED=1 .venv/bin/pytest
test/unit/charts -q``. The integration test ``test/integration/test_chart_install.py`` asks a real
API server the same questions about the account.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.unit.charts.chart_render import (
    CHART,
    HELM_ONLY_LABELS,
    NAMESPACE,
    ROOT,
    _check_or_update,
    assert_hardened,
    container,
    env_of,
    find,
    flag,
    granted_by,
    of,
    one,
    options_of_the_binary,
    render,
    render_plain,
    run_helm,
    set_flags,
)

import pkg.app.gpu_dra_controller as dra_controller_app
from pkg.dracontroller.accounting.store import LedgerStore

COMPONENT = "gpu-dra-controller"
LEASE = "gpu-dra-controller-leader"
PLAIN_DRA_RBAC = ROOT / "config" / "rbac" / "gpu-dra-controller.yaml"
PLAIN_DRA_RBAC_HEADER = """\
# gpu-dra-controller's ServiceAccount and RBAC for installs without Helm, in namespace gpu-control-plane:
#   kubectl create namespace gpu-control-plane && kubectl apply -f config/rbac/gpu-dra-controller.yaml
# Rendered from charts/gpu-control-plane (release gpu-control-plane, default values) by
# test/unit/charts/test_chart_dra_controller.py, which fails when this file is stale. Do not edit;
# change the chart's templates and run:
#   GPU_CP_UPDATE_GENERATED=1 .venv/bin/pytest test/unit/charts -q
"""

# (apiGroup, resource, verb) of every call gpu-dra-controller makes outside its own namespace: the
# informers of claims, slices, classes, Pods and Namespaces (list, watch), the metadata JSON patch of
# a claim, the PUT of its status subresource (never a status patch), events.k8s.io events (create,
# patch for a series), and `explain` run in its Pod (get the claim's Namespace and the Node asked
# about), and the ClaimExplanations it answers (list, watch, delete after the TTL; a status apply).
# Nothing else: it never writes ResourceSlices, DeviceClasses, Pods or Nodes.
DRA_CONTROLLER_PERMISSIONS = frozenset(
    {
        *(("resource.k8s.io", "resourceclaims", verb) for verb in ("list", "watch", "patch")),
        ("resource.k8s.io", "resourceclaims/status", "update"),
        *(
            ("resource.k8s.io", resource, verb)
            for resource in ("resourceslices", "deviceclasses")
            for verb in ("list", "watch")
        ),
        *(("", resource, verb) for resource in ("pods", "namespaces") for verb in ("list", "watch")),
        ("", "namespaces", "get"),
        ("", "nodes", "get"),
        ("gpu.deckhouse.io", "physicalgpus", "list"),
        ("gpu.deckhouse.io", "physicalgpus", "watch"),
        *(("gpu.deckhouse.io", "claimexplanations", verb) for verb in ("list", "watch", "delete")),
        ("gpu.deckhouse.io", "claimexplanations/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
    }
)


@pytest.fixture(scope="module")
def docs(helm: Path) -> list[dict[str, Any]]:
    return of(render(helm), COMPONENT)


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(of(docs, COMPONENT), "Deployment")


def pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(deployment(docs)["spec"]["template"]["spec"])


def main_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return container(of(docs, COMPONENT), COMPONENT)


# -- RBAC ---------------------------------------------------------------------------------------------


def test_cluster_role_grants_exactly_the_dra_controller_calls(docs: list[dict[str, Any]]) -> None:
    assert granted_by(one(docs, "ClusterRole")) == DRA_CONTROLLER_PERMISSIONS


def test_no_wildcards(docs: list[dict[str, Any]]) -> None:
    for role in [*find(docs, "ClusterRole"), *find(docs, "Role")]:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert not any("*" in entry for entry in rule.get(field, [])), (role["kind"], rule)
        assert "aggregationRule" not in role


def lease_roles(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in find(docs, kind) if d["metadata"]["name"].endswith("-leader-election")]


def test_ledger_role_is_its_own_configmaps_in_the_release_namespace(helm: Path) -> None:
    ledger = LedgerStore(client=None, namespace=NAMESPACE, name="gpu-dra-allocation-ledger")  # type: ignore[arg-type]
    for replicas in (1, 2):  # the ledger is written with or without leader election
        docs = of(render(helm, {"draController.replicas": replicas}), COMPONENT)
        [role] = [d for d in find(docs, "Role") if d["metadata"]["name"].endswith("-allocation-ledger")]
        assert role["metadata"]["namespace"] == NAMESPACE
        assert sorted(
            (r["resources"], sorted(r["verbs"]), r.get("resourceNames")) for r in role["rules"]
        ) == [
            (["configmaps"], ["create"], None),
            (["configmaps"], ["get", "update"], ledger.names()),  # the head and every part
        ]
        assert flag(docs, "allocation-ledger", COMPONENT) == "gpu-dra-allocation-ledger"


def test_lease_role_is_its_own_lease_in_the_release_namespace(docs: list[dict[str, Any]]) -> None:
    [role] = lease_roles(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert flag(docs, "leader-election-id", COMPONENT) == LEASE
    rules = sorted(
        (rule["apiGroups"], rule["resources"], sorted(rule["verbs"]), rule.get("resourceNames"))
        for rule in role["rules"]
    )
    assert rules == [
        (["coordination.k8s.io"], ["leases"], ["create"], None),
        (["coordination.k8s.io"], ["leases"], ["get", "update"], [LEASE]),
    ]
    assert env_of(docs, COMPONENT)["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert not any(arg.startswith("--leader-election-namespace") for arg in main_container(docs)["args"])


def test_bindings_bind_the_roles_to_the_deployment_service_account(docs: list[dict[str, Any]]) -> None:
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    assert account == f"rel-gpu-control-plane-{COMPONENT}"
    assert pod(docs)["serviceAccountName"] == account
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [subject]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": one(docs, "ClusterRole")["metadata"]["name"],
    }
    roles = sorted(role["metadata"]["name"] for role in find(docs, "Role"))
    bindings = sorted(find(docs, "RoleBinding"), key=lambda b: b["metadata"]["name"])
    assert [b["metadata"]["name"] for b in bindings] == roles  # each Role bound by its namesake
    for binding in bindings:
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": binding["metadata"]["name"],
        }


def test_plain_rbac_is_the_chart_rbac(helm: Path) -> None:
    expected = render_plain(
        helm,
        PLAIN_DRA_RBAC_HEADER,
        (f"templates/{COMPONENT}-serviceaccount.yaml", f"templates/{COMPONENT}-rbac.yaml"),
    )
    _check_or_update(PLAIN_DRA_RBAC, expected)
    plain = [doc for doc in yaml.safe_load_all(PLAIN_DRA_RBAC.read_text(encoding="utf-8")) if doc]
    assert [doc["kind"] for doc in plain] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
    ]
    for doc in plain:
        assert not set(HELM_ONLY_LABELS) & set(doc["metadata"]["labels"])
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == "gpu-control-plane"
    assert granted_by(one(plain, "ClusterRole")) == DRA_CONTROLLER_PERMISSIONS
    assert one(plain, "ClusterRoleBinding")["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": f"gpu-control-plane-{COMPONENT}",
            "namespace": "gpu-control-plane",
        }
    ]


def test_namespace_roles_may_ask_for_explanations(helm: Path) -> None:
    """edit and admin (aggregated) may create, read and delete ClaimExplanations, view may read
    them; nobody but the controller may write their status; off with explanationAccess=false."""
    docs = of(render(helm), "claim-explanation")
    roles = {d["metadata"]["name"].rsplit("-", 1)[-1]: d for d in find(docs, "ClusterRole")}
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    assert {k for k in roles["edit"]["metadata"]["labels"] if k.startswith(aggregate)} == {
        f"{aggregate}edit",
        f"{aggregate}admin",
    }
    assert {k for k in roles["view"]["metadata"]["labels"] if k.startswith(aggregate)} == {f"{aggregate}view"}
    assert granted_by(roles["edit"]) == {
        ("gpu.deckhouse.io", "claimexplanations", verb)
        for verb in ("create", "get", "list", "watch", "delete")
    }
    assert granted_by(roles["view"]) == {
        ("gpu.deckhouse.io", "claimexplanations", verb) for verb in ("get", "list", "watch")
    }
    assert not find(docs, "ClusterRoleBinding")  # aggregated, bound to nobody directly
    assert not of(render(helm, {"draController.explanationAccess": False}), "claim-explanation")


def test_explanation_ttl_is_a_flag(helm: Path) -> None:
    assert flag(of(render(helm), COMPONENT), "explanation-ttl", COMPONENT) == "10m"
    docs = of(render(helm, {"draController.explanationTTL": "90s"}), COMPONENT)
    assert flag(docs, "explanation-ttl", COMPONENT) == "90s"


# -- the Deployment ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("replicas", "elect"), [(1, False), (2, True), (3, True)])
def test_leader_election_follows_replicas(helm: Path, replicas: int, elect: bool) -> None:
    docs = of(render(helm, {"draController.replicas": replicas}), COMPONENT)
    assert deployment(docs)["spec"]["replicas"] == replicas
    assert flag(docs, "leader-elect", COMPONENT) == str(elect).lower()
    assert len(lease_roles(docs, "Role")) == len(lease_roles(docs, "RoleBinding")) == int(elect)
    assert len(find(docs, "PodDisruptionBudget")) == int(elect)
    strategy = deployment(docs)["spec"]["strategy"]
    if elect:
        assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        budget = one(docs, "PodDisruptionBudget")["spec"]
        assert budget["maxUnavailable"] == 1
        assert budget["selector"] == deployment(docs)["spec"]["selector"]
    else:
        assert strategy == {"type": "Recreate"}


def test_replicas_are_independent_of_gpu_controller(helm: Path) -> None:
    docs = render(helm, {"controller.replicas": 1, "draController.replicas": 2})
    assert flag(docs, "leader-elect") == "false"
    assert flag(docs, "leader-elect", COMPONENT) == "true"
    budgets = {
        doc["metadata"]["labels"]["app.kubernetes.io/component"] for doc in find(docs, "PodDisruptionBudget")
    }
    assert budgets == {COMPONENT}


def test_container_command_args_env_and_probes(docs: list[dict[str, Any]]) -> None:
    main = main_container(docs)
    assert main["name"] == COMPONENT
    assert main["image"] == "gpu-control-plane:0.1.0"
    assert main["command"] == [COMPONENT]
    assert main["args"] == [
        "--metrics-bind-address=:8080",
        "--leader-elect=true",
        f"--leader-election-id={LEASE}",
        "--workers=8",
        "--allocation-ledger=gpu-dra-allocation-ledger",
        "--accounting-period=10s",
        "--explanation-ttl=10m",
    ]
    assert env_of(docs, COMPONENT) == {
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "LOG_LEVEL": "Info",
        "LOG_OUTPUT": "stderr",
        "LOG_DEBUG_VERBOSITY": "0",
        "LOG_DEBUG_CONTROLLER_LIST": "",
    }
    assert main["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_security_context_is_hardened(docs: list[dict[str, Any]]) -> None:
    assert_hardened(pod(docs), main_container(docs))


def test_service_and_default_affinity_select_exactly_its_pods(docs: list[dict[str, Any]]) -> None:
    selector = one(docs, "Service")["spec"]["selector"]
    assert selector == deployment(docs)["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/component"] == COMPONENT
    assert selector.items() <= deployment(docs)["spec"]["template"]["metadata"]["labels"].items()
    (term,) = pod(docs)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector


def test_values_reach_the_deployment(helm: Path) -> None:
    docs = of(
        render(
            helm,
            {
                "draController.workers": 7,
                "draController.metrics.port": 9443,
                "draController.nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                "draController.tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "draController.affinity": {"nodeAffinity": {}},
                "draController.priorityClassName": "system-cluster-critical",
                "logging.level": "Debug",
            },
        ),
        COMPONENT,
    )
    spec, main = pod(docs), main_container(docs)
    assert flag(docs, "workers", COMPONENT) == "7"
    assert flag(docs, "metrics-bind-address", COMPONENT) == ":9443"
    assert main["ports"][0]["containerPort"] == 9443
    assert one(docs, "Service")["spec"]["ports"] == [
        {"name": "metrics", "port": 9443, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert spec["affinity"] == {"nodeAffinity": {}}
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert env_of(docs, COMPONENT)["LOG_DEBUG_VERBOSITY"] == "10"


def test_disabled_renders_nothing(helm: Path) -> None:
    docs = render(helm, {"draController.enabled": False})
    assert of(docs, COMPONENT) == []
    assert of(docs, "gpu-controller") != []
    result = run_helm(helm, "lint", "--strict", str(CHART), *set_flags({"draController.enabled": False}))
    assert "[WARNING]" not in result.stdout


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"draController.replicas": 0}, "/draController/replicas"),
        ({"draController.workers": "two"}, "/draController/workers"),
        ({"draController.enabled": "yes"}, "/draController/enabled"),
        ({"draController.metrics.port": 70000}, "/draController/metrics/port"),
        ({"draController.replica": 3}, "additional properties 'replica'"),
    ],
)
def test_schema_rejects_bad_values(helm: Path, values: dict[str, Any], message: str) -> None:
    result = run_helm(helm, "template", "rel", str(CHART), *set_flags(values), check=False)
    assert result.returncode != 0
    assert message in result.stderr


# -- the binary accepts what the chart passes ----------------------------------------------------------


@pytest.mark.parametrize("replicas", [1, 2])
def test_the_binary_accepts_the_rendered_args(
    helm: Path, replicas: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = of(render(helm, {"draController.replicas": replicas, "draController.workers": 5}), COMPONENT)
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    options = options_of_the_binary(dra_controller_app, main_container(docs)["args"], monkeypatch)
    assert options.metrics_bind_address == ":8080"
    assert options.leader_elect is (replicas > 1)
    assert options.leader_election_namespace == NAMESPACE
    assert options.leader_election_id == LEASE
    assert options.workers == 5


def test_lease_name_is_the_binary_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """config/rbac grants this Lease name, so a Deployment without the flag works with it too."""
    assert options_of_the_binary(dra_controller_app, [], monkeypatch).leader_election_id == LEASE


def test_console_script_is_the_binary() -> None:
    """The container's command is the console script that runs :func:`pkg.app.gpu_dra_controller.main`."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["scripts"][COMPONENT] == "pkg.app.gpu_dra_controller:main"
