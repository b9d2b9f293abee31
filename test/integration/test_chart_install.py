"""The Helm chart applied to the real API server: its objects are accepted and its RBAC is exactly enough.

The chart is rendered with ``helm template`` and applied with ``kubectl apply --server-side`` into the
test's namespace, under a release name of its own so that its cluster-scoped objects (ClusterRole,
ClusterRoleBinding) never collide with another run; they are deleted by label at the end.

Three angles on the RBAC, each asking the API server rather than reading YAML:

* ``kubectl auth can-i`` as the chart's ServiceAccount (with the groups a real token carries) for
  every call gpu-controller makes (allowed) and for calls it must never make (refused);
* the same two questions for gpu-dra-controller's ServiceAccount (its claims, slices, classes, Pods,
  Namespaces, events and its own Lease; never ResourceSlice writes, Nodes or Secrets);
* a SelfSubjectRulesReview as each account, minus the rules every account of the namespace already
  has, equals the chart's rules and nothing more;
* gpu-controller itself runs with the account's token and the chart's own arguments and environment,
  and does its whole job (informers, status writes, leader election, orphan deletion, events, node
  gate labels, the node components' DaemonSets from the chart's ConfigMap, a GPUClass's DeviceClass)
  with no request refused.

No kubelet runs here, so the chart's Deployments never start a Pod; they are pinned to a node label no
node has, so their Pods stay unscheduled and the namespace is deleted without waiting on a kubelet.
The node components' DaemonSets (gpu-controller's) are pinned the same way through the values; the
node accounts' RBAC and the node admission policy are tested in ``test_node_admission_policy.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_objects import create_ready_node
from k8s_fields import meta, name_of
from kubernetes.client import V1ObjectMeta
from process_helpers import eventually, refused_requests, running

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, GPUClass, PhysicalGPU
from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.devcluster.processes import free_port
from pkg.domain.kinds import GPU_CLASS, PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DAEMON_SET, EVENT, LEASE, NODE

ROOT = Path(__file__).resolve().parents[2]
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


def helm_template(release: str, namespace: str, values: dict[str, Any]) -> str:
    args = [str(default_bin_dir() / "helm"), "template", release, str(CHART), "--namespace", namespace]
    for path, value in values.items():
        args += ["--set-json", f"{path}={json.dumps(value)}"]
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


def test_chart_objects_are_created(control_plane: ControlPlane, release: Release) -> None:
    selector = f"app.kubernetes.io/instance={release.name}"
    namespaced = control_plane.kubectl(
        "get",
        "deployment,daemonset,configmap,serviceaccount,service,poddisruptionbudget,role,rolebinding",
        "-n",
        release.namespace,
        "-l",
        selector,
        "-o",
        "name",
    ).split()
    prefix = f"{release.name}-gpu-control-plane-gpu-controller"
    dra = f"{release.name}-gpu-control-plane-gpu-dra-controller"
    agent = f"{release.name}-gpu-control-plane-gpu-node-agent"
    handler = f"{release.name}-gpu-control-plane-gpu-handler"
    policy = f"{release.name}-gpu-control-plane-node-scope"
    assert sorted(namespaced) == sorted(
        [
            f"deployment.apps/{prefix}",
            f"deployment.apps/{dra}",
            f"configmap/{release.name}-gpu-control-plane",
            f"configmap/{release.name}-gpu-control-plane-dashboard",
            f"serviceaccount/{prefix}",
            f"serviceaccount/{dra}",
            f"serviceaccount/{agent}",
            f"serviceaccount/{handler}",
            f"service/{prefix}-metrics",
            f"service/{dra}-metrics",
            f"poddisruptionbudget.policy/{prefix}",
            f"poddisruptionbudget.policy/{dra}",
            f"role.rbac.authorization.k8s.io/{prefix}-leader-election",
            f"role.rbac.authorization.k8s.io/{prefix}-node-components",
            f"role.rbac.authorization.k8s.io/{dra}-leader-election",
            f"role.rbac.authorization.k8s.io/{dra}-allocation-ledger",
            f"rolebinding.rbac.authorization.k8s.io/{prefix}-leader-election",
            f"rolebinding.rbac.authorization.k8s.io/{prefix}-node-components",
            f"rolebinding.rbac.authorization.k8s.io/{dra}-leader-election",
            f"rolebinding.rbac.authorization.k8s.io/{dra}-allocation-ledger",
        ]
    )
    cluster = control_plane.kubectl(
        "get",
        "clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
        "-l",
        selector,
        "-o",
        "name",
    )
    assert sorted(cluster.split()) == sorted(
        [
            f"clusterrole.rbac.authorization.k8s.io/{prefix}",
            f"clusterrole.rbac.authorization.k8s.io/{dra}",
            f"clusterrole.rbac.authorization.k8s.io/{agent}",
            f"clusterrole.rbac.authorization.k8s.io/{handler}",
            f"clusterrolebinding.rbac.authorization.k8s.io/{prefix}",
            f"clusterrolebinding.rbac.authorization.k8s.io/{dra}",
            f"clusterrolebinding.rbac.authorization.k8s.io/{agent}",
            f"clusterrolebinding.rbac.authorization.k8s.io/{handler}",
            # kube-rbac-proxy: the role a scraper is bound to, and the proxies' token and access reviews
            f"clusterrole.rbac.authorization.k8s.io/{release.name}-gpu-control-plane-metrics-reader",
            f"clusterrole.rbac.authorization.k8s.io/{release.name}-gpu-control-plane-metrics-auth",
            f"clusterrolebinding.rbac.authorization.k8s.io/{release.name}-gpu-control-plane-metrics-auth",
            f"validatingadmissionpolicy.admissionregistration.k8s.io/{policy}",
            f"validatingadmissionpolicybinding.admissionregistration.k8s.io/{policy}",
        ]
    )


def can_i(control_plane: ControlPlane, release: Release, verb: str, resource: str, *extra: str) -> bool:
    out = control_plane.kubectl("auth", "can-i", verb, resource, *extra, *impersonate(release), check=False)
    answer = out.strip().split()[0] if out.strip() else ""
    assert answer in ("yes", "no"), f"can-i {verb} {resource} {extra}: {out!r}"
    return answer == "yes"


# (verb, resource, extra kubectl flags); "{ns}" is the release namespace.
NEEDED = [
    *((verb, "physicalgpus.gpu.deckhouse.io", ()) for verb in ("list", "watch", "patch", "delete")),
    *((verb, "physicalgpus.gpu.deckhouse.io", ("--subresource=status",)) for verb in ("update", "patch")),
    *((verb, "nodes", ()) for verb in ("list", "watch", "patch")),
    *((verb, "gpuclasses.gpu.deckhouse.io", ()) for verb in ("list", "watch")),
    ("update", "gpuclasses.gpu.deckhouse.io", ("--subresource=status",)),
    ("update", "gpuclasses.gpu.deckhouse.io", ("--subresource=finalizers",)),
    *((verb, "deviceclasses.resource.k8s.io", ()) for verb in ("list", "watch", "create", "patch")),
    # The node components, in the release namespace: its ConfigMap only, the DaemonSets, validator Pods.
    *((verb, "configmaps/{config}", ("-n", "{ns}")) for verb in ("list", "watch")),
    ("update", "configmaps/{config}", ("--subresource=finalizers", "-n", "{ns}")),
    *(
        (verb, "daemonsets.apps", ("-n", "{ns}"))
        for verb in ("get", "list", "watch", "create", "patch", "delete")
    ),
    *((verb, "pods", ("-n", "{ns}")) for verb in ("list", "watch")),
    # Events of cluster-scoped PhysicalGPUs land in "default"; namespaced objects' in their own.
    ("create", "events.events.k8s.io", ("-n", "default")),
    ("patch", "events.events.k8s.io", ("-n", "default")),
    ("create", "events.events.k8s.io", ("-n", "{ns}")),
    ("create", "leases.coordination.k8s.io", ("-n", "{ns}")),
    ("get", f"leases.coordination.k8s.io/{LEASE_NAME}", ("-n", "{ns}")),
    ("update", f"leases.coordination.k8s.io/{LEASE_NAME}", ("-n", "{ns}")),
]

FORBIDDEN = [
    # Everything is read from informers: nothing by name (the e2e tier's RBAC audit found no get).
    *(
        ("get", resource, extra)
        for resource, extra in (
            ("physicalgpus.gpu.deckhouse.io", ()),
            ("physicalgpus.gpu.deckhouse.io", ("--subresource=status",)),
            ("nodes", ()),
            ("gpuclasses.gpu.deckhouse.io", ()),
            ("deviceclasses.resource.k8s.io", ()),
            ("configmaps/{config}", ("-n", "{ns}")),
            ("pods", ("-n", "{ns}")),
        )
    ),
    # PhysicalGPUs are created and fully rewritten only by node agents.
    ("create", "physicalgpus.gpu.deckhouse.io", ()),
    ("update", "physicalgpus.gpu.deckhouse.io", ()),
    ("deletecollection", "physicalgpus.gpu.deckhouse.io", ()),
    ("update", "gpuclasses.gpu.deckhouse.io", ()),
    ("delete", "gpuclasses.gpu.deckhouse.io", ()),
    ("delete", "deviceclasses.resource.k8s.io", ()),
    ("update", "deviceclasses.resource.k8s.io", ()),
    ("delete", "nodes", ()),
    ("update", "nodes", ()),
    # Only its own ConfigMap, only in its namespace; DaemonSets and Pods nowhere else.
    ("get", "configmaps/someone-elses-config", ("-n", "{ns}")),
    ("list", "configmaps", ("-n", "{ns}")),
    ("update", "configmaps/{config}", ("-n", "{ns}")),
    ("get", "configmaps/{config}", ("-n", "default")),
    ("create", "daemonsets.apps", ("-n", "default")),
    ("list", "pods", ("--all-namespaces",)),
    ("delete", "pods", ("-n", "{ns}")),
    ("patch", "nodes", ("--subresource=status",)),
    ("get", "secrets", ("-n", "{ns}")),
    ("update", "secrets", ("-n", "{ns}")),
    ("list", "secrets", ("--all-namespaces",)),
    ("create", "pods", ("-n", "{ns}")),
    ("list", "events.events.k8s.io", ("-n", "default")),
    ("delete", "events.events.k8s.io", ("-n", "default")),
    # Leases: only its own, only in its own namespace, never listed or deleted.
    ("create", "leases.coordination.k8s.io", ("-n", "default")),
    ("get", f"leases.coordination.k8s.io/{LEASE_NAME}", ("-n", "kube-system")),
    ("get", "leases.coordination.k8s.io/someone-elses-lease", ("-n", "{ns}")),
    ("update", "leases.coordination.k8s.io/someone-elses-lease", ("-n", "{ns}")),
    ("delete", f"leases.coordination.k8s.io/{LEASE_NAME}", ("-n", "{ns}")),
    ("list", "leases.coordination.k8s.io", ("-n", "{ns}")),
    # No way to grow its own rights.
    ("bind", "clusterroles.rbac.authorization.k8s.io", ()),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", ()),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", ()),
    ("impersonate", "serviceaccounts", ("-n", "{ns}")),
    ("create", "serviceaccounts/token", ("-n", "{ns}")),
    # ResourceSlices belong to gpu-handler.
    ("create", "resourceslices.resource.k8s.io", ()),
]


def _ask(control_plane: ControlPlane, release: Release, checks: list[Any]) -> dict[str, bool]:
    answers = {}
    for verb, resource, extra in checks:
        flags = tuple(flag.replace("{ns}", release.namespace) for flag in extra)
        target = resource.replace("{config}", f"{release.name}-gpu-control-plane")
        answers[f"{verb} {target} {' '.join(flags)}".strip()] = can_i(
            control_plane, release, verb, target, *flags
        )
    return answers


def test_service_account_may_make_every_call_of_the_controller(
    control_plane: ControlPlane, release: Release
) -> None:
    refused = [check for check, allowed in _ask(control_plane, release, NEEDED).items() if not allowed]
    assert refused == []


def test_service_account_may_do_nothing_else(control_plane: ControlPlane, release: Release) -> None:
    allowed = [check for check, ok in _ask(control_plane, release, FORBIDDEN).items() if ok]
    assert allowed == []


def resource_rules(control_plane: ControlPlane, namespace: str, as_flags: list[str]) -> set[tuple[str, ...]]:
    """(group, resource, verb, resourceName) the API server grants ``as_flags`` in ``namespace``."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    # Client-side validation would list CRDs as the impersonated account; the review needs no check.
    out = control_plane.kubectl(
        "create", "--validate=false", "-o", "json", "-f", "-", *as_flags, input_text=json.dumps(review)
    )
    status = json.loads(out)["status"]
    assert not status.get("incomplete"), status.get("evaluationError")
    return {
        (group, resource, verb, name)
        for rule in status["resourceRules"]
        for group in rule.get("apiGroups", [""])
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or ["<any>"]
    }


# The metrics sidecar (kube-rbac-proxy) runs as the component's account: it reviews each scraper's
# token and asks whether the scraper may read /metrics.
METRICS_PROXY_REVIEWS = {
    ("authentication.k8s.io", "tokenreviews", "create", "<any>"),
    ("authorization.k8s.io", "subjectaccessreviews", "create", "<any>"),
}


def test_rules_review_shows_only_the_chart_rules(control_plane: ControlPlane, release: Release) -> None:
    """What the account can do beyond any account of its namespace (the namespace's default one)."""
    granted = resource_rules(control_plane, release.namespace, impersonate(release))
    baseline = resource_rules(
        control_plane,
        release.namespace,
        [
            f"--as=system:serviceaccount:{release.namespace}:default",
            "--as-group=system:serviceaccounts",
            f"--as-group=system:serviceaccounts:{release.namespace}",
            "--as-group=system:authenticated",
        ],
    )
    assert granted - baseline == {
        *(
            ("gpu.deckhouse.io", "physicalgpus", verb, "<any>")
            for verb in ("list", "watch", "patch", "delete")
        ),
        *(("gpu.deckhouse.io", "physicalgpus/status", verb, "<any>") for verb in ("update", "patch")),
        *(("", "nodes", verb, "<any>") for verb in ("list", "watch", "patch")),
        *(("gpu.deckhouse.io", "gpuclasses", verb, "<any>") for verb in ("list", "watch")),
        ("gpu.deckhouse.io", "gpuclasses/status", "update", "<any>"),
        ("gpu.deckhouse.io", "gpuclasses/finalizers", "update", "<any>"),
        *(
            ("resource.k8s.io", "deviceclasses", verb, "<any>")
            for verb in ("list", "watch", "create", "patch")
        ),
        *(("", "configmaps", verb, f"{release.name}-gpu-control-plane") for verb in ("list", "watch")),
        ("", "configmaps/finalizers", "update", f"{release.name}-gpu-control-plane"),
        *(
            ("apps", "daemonsets", verb, "<any>")
            for verb in ("get", "list", "watch", "create", "patch", "delete")
        ),
        *(("", "pods", verb, "<any>") for verb in ("list", "watch")),
        ("events.k8s.io", "events", "create", "<any>"),
        ("events.k8s.io", "events", "patch", "<any>"),
        ("coordination.k8s.io", "leases", "create", "<any>"),
        ("coordination.k8s.io", "leases", "get", LEASE_NAME),
        ("coordination.k8s.io", "leases", "update", LEASE_NAME),
        *METRICS_PROXY_REVIEWS,
    }


# -- gpu-dra-controller's ServiceAccount -----------------------------------------------------------------


def dra_account(release: Release) -> Release:
    """The same release, seen as gpu-dra-controller's ServiceAccount."""
    return dataclasses.replace(
        release, service_account=f"{release.name}-gpu-control-plane-gpu-dra-controller"
    )


# Every call gpu-dra-controller makes: informers of claims, slices, classes, Pods and Namespaces, the
# claim's metadata JSON patch and status PUT, events in the claims' namespaces, its own Lease.
DRA_NEEDED = [
    *((verb, "resourceclaims.resource.k8s.io", ()) for verb in ("list", "watch", "patch")),
    ("patch", "resourceclaims.resource.k8s.io", ("-n", "{ns}")),
    ("update", "resourceclaims.resource.k8s.io", ("--subresource=status", "-n", "{ns}")),
    *((verb, "resourceslices.resource.k8s.io", ()) for verb in ("list", "watch")),
    *((verb, "deviceclasses.resource.k8s.io", ()) for verb in ("list", "watch")),
    *((verb, "pods", ("--all-namespaces",)) for verb in ("list", "watch")),
    *((verb, "namespaces", ()) for verb in ("list", "watch")),
    # `explain` run in its Pod: the claim's Namespace and the Node asked about, by name.
    ("get", "namespaces", ()),
    ("get", "nodes", ()),
    ("create", "events.events.k8s.io", ("-n", "{ns}")),
    ("patch", "events.events.k8s.io", ("-n", "{ns}")),
    ("create", "leases.coordination.k8s.io", ("-n", "{ns}")),
    ("get", f"leases.coordination.k8s.io/{DRA_LEASE_NAME}", ("-n", "{ns}")),
    ("update", f"leases.coordination.k8s.io/{DRA_LEASE_NAME}", ("-n", "{ns}")),
    # The allocation accountant: PhysicalGPU names, its ledger ConfigMap.
    *((verb, "physicalgpus.gpu.deckhouse.io", ()) for verb in ("list", "watch")),
    ("create", "configmaps", ("-n", "{ns}")),
    ("get", f"configmaps/{LEDGER_NAME}", ("-n", "{ns}")),
    ("update", f"configmaps/{LEDGER_NAME}", ("-n", "{ns}")),
]

DRA_FORBIDDEN = [
    # Claims come from the informer: none is read by name (the e2e tier's RBAC audit found no get).
    ("get", "resourceclaims.resource.k8s.io", ("-n", "{ns}")),
    # Claims are created and deleted by users and the kube-controller-manager; status is only PUT.
    ("create", "resourceclaims.resource.k8s.io", ("-n", "{ns}")),
    ("delete", "resourceclaims.resource.k8s.io", ("-n", "{ns}")),
    ("update", "resourceclaims.resource.k8s.io", ("-n", "{ns}")),
    ("patch", "resourceclaims.resource.k8s.io", ("--subresource=status", "-n", "{ns}")),
    # DRA objects of other components.
    ("create", "resourceslices.resource.k8s.io", ()),
    ("patch", "resourceslices.resource.k8s.io", ()),
    ("delete", "resourceslices.resource.k8s.io", ()),
    ("create", "deviceclasses.resource.k8s.io", ()),
    ("create", "pods", ("-n", "{ns}")),
    ("delete", "pods", ("-n", "{ns}")),
    ("delete", "nodes", ()),
    ("patch", "nodes", ()),
    ("update", "namespaces", ()),
    ("patch", "physicalgpus.gpu.deckhouse.io", ()),
    ("get", "secrets", ("-n", "{ns}")),
    ("update", "secrets", ("-n", "{ns}")),
    ("list", "secrets", ("--all-namespaces",)),
    ("list", "events.events.k8s.io", ("-n", "{ns}")),
    # ConfigMaps: only its ledger, never deleted, never another one.
    ("update", "configmaps/gpu-control-plane", ("-n", "{ns}")),
    ("delete", f"configmaps/{LEDGER_NAME}", ("-n", "{ns}")),
    ("list", "configmaps", ("-n", "{ns}")),
    # Leases: only its own, only in its own namespace; not gpu-controller's.
    ("create", "leases.coordination.k8s.io", ("-n", "default")),
    ("get", f"leases.coordination.k8s.io/{LEASE_NAME}", ("-n", "{ns}")),
    ("update", f"leases.coordination.k8s.io/{LEASE_NAME}", ("-n", "{ns}")),
    ("delete", f"leases.coordination.k8s.io/{DRA_LEASE_NAME}", ("-n", "{ns}")),
    ("list", "leases.coordination.k8s.io", ("-n", "{ns}")),
    ("bind", "clusterroles.rbac.authorization.k8s.io", ()),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", ()),
    ("impersonate", "serviceaccounts", ("-n", "{ns}")),
    ("create", "serviceaccounts/token", ("-n", "{ns}")),
]


def test_dra_controller_account_may_make_every_call_it_needs(
    control_plane: ControlPlane, release: Release
) -> None:
    answers = _ask(control_plane, dra_account(release), DRA_NEEDED)
    assert [check for check, allowed in answers.items() if not allowed] == []


def test_dra_controller_account_may_do_nothing_else(control_plane: ControlPlane, release: Release) -> None:
    answers = _ask(control_plane, dra_account(release), DRA_FORBIDDEN)
    assert [check for check, allowed in answers.items() if allowed] == []


def test_dra_controller_rules_review_shows_only_the_chart_rules(
    control_plane: ControlPlane, release: Release
) -> None:
    granted = resource_rules(control_plane, release.namespace, impersonate(dra_account(release)))
    baseline = resource_rules(
        control_plane,
        release.namespace,
        impersonate(dataclasses.replace(release, service_account="default")),
    )
    assert granted - baseline == {
        *(("resource.k8s.io", "resourceclaims", verb, "<any>") for verb in ("list", "watch", "patch")),
        ("resource.k8s.io", "resourceclaims/status", "update", "<any>"),
        *(
            ("resource.k8s.io", resource, verb, "<any>")
            for resource in ("resourceslices", "deviceclasses")
            for verb in ("list", "watch")
        ),
        *(("", resource, verb, "<any>") for resource in ("pods", "namespaces") for verb in ("list", "watch")),
        ("", "namespaces", "get", "<any>"),
        ("", "nodes", "get", "<any>"),
        ("events.k8s.io", "events", "create", "<any>"),
        ("events.k8s.io", "events", "patch", "<any>"),
        ("coordination.k8s.io", "leases", "create", "<any>"),
        ("coordination.k8s.io", "leases", "get", DRA_LEASE_NAME),
        ("coordination.k8s.io", "leases", "update", DRA_LEASE_NAME),
        ("gpu.deckhouse.io", "physicalgpus", "list", "<any>"),
        ("gpu.deckhouse.io", "physicalgpus", "watch", "<any>"),
        ("", "configmaps", "create", "<any>"),
        ("", "configmaps", "get", LEDGER_NAME),
        ("", "configmaps", "update", LEDGER_NAME),
        *METRICS_PROXY_REVIEWS,
    }


# -- gpu-controller itself, authenticated as the chart's ServiceAccount ---------------------------------


def service_account_kubeconfig(control_plane: ControlPlane, release: Release, path: Path) -> Path:
    """A kubeconfig holding a short-lived token of the account (TokenRequest), as in a Pod."""
    token = control_plane.kubectl(
        "create", "token", release.service_account, "-n", release.namespace, "--duration=1h"
    ).strip()
    admin = json.loads(Path(control_plane.kubeconfig).read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": "sa"}}],
        "current-context": "sa",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def rendered_container(release: Release) -> dict[str, Any]:
    text = helm_template(release.name, release.namespace, {"crds.install": False})
    (deployment,) = [
        doc
        for doc in yaml.safe_load_all(text)
        if doc
        and doc["kind"] == "Deployment"
        and doc["metadata"]["labels"]["app.kubernetes.io/component"] == "gpu-controller"
    ]
    # beside it, the kube-rbac-proxy sidecar that serves its metrics
    (container,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "gpu-controller"
    ]
    return dict(container)


def _gone(kube: KubeClient, name: str) -> bool:
    try:
        kube.get(PHYSICAL_GPU, name)
    except NotFoundError:
        return True
    return False


def _lease_holder(kube: KubeClient, release: Release) -> str | None:
    try:
        lease = kube.get(LEASE, LEASE_NAME, release.namespace)
    except NotFoundError:
        return None
    return lease.spec.holder_identity if lease.spec else None


def _daemon_sets(kube: KubeClient, release: Release) -> list[str]:
    items, _ = kube.list(
        DAEMON_SET, namespace=release.namespace, label_selector="app.kubernetes.io/managed-by=gpu-controller"
    )
    return [name_of(ds) for ds in items]


def _valid(kube: KubeClient, name: str) -> bool:
    status = kube.get(GPU_CLASS, name).status
    return bool(status and status.valid and status.generated and status.generated.device_class_name == name)


def _conditions(kube: KubeClient, name: str) -> dict[str, str]:
    gpu = kube.get(PHYSICAL_GPU, name)
    return {c.type: c.status for c in (gpu.status.conditions or [])} if gpu.status else {}


def test_gpu_controller_works_with_exactly_these_permissions(
    control_plane: ControlPlane, kube: KubeClient, release: Release, unique: str, tmp_path: Path
) -> None:
    node = f"chart-node-{unique}"
    create_ready_node(kube, node)
    kept = f"{node}-0-10de-20b7"
    orphan = f"chart-gone-{unique}-0-10de-20b7"
    kube.create(
        PHYSICAL_GPU,
        PhysicalGPU(metadata=V1ObjectMeta(name=kept, labels={LABEL_NODE: node, LABEL_VENDOR: "nvidia"})),
    )
    gpu_class = f"chart-class-{unique}"
    kube.create(
        GPU_CLASS,
        GPUClass.from_api_dict(
            {"metadata": {"name": gpu_class}, "spec": {"vendor": "Nvidia", "deviceType": "Physical"}}
        ),
    )
    kube.create(
        PHYSICAL_GPU,
        PhysicalGPU(metadata=V1ObjectMeta(name=orphan, labels={LABEL_NODE: f"chart-gone-{unique}"})),
    )
    container = rendered_container(release)
    # The chart's own arguments and environment; only the listen address and the credentials differ
    # from a Pod (a free loopback port, the account's token instead of the mounted one).
    args = [
        *(arg for arg in container["args"] if not arg.startswith("--metrics-bind-address=")),
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--kubeconfig={service_account_kubeconfig(control_plane, release, tmp_path / 'sa.kubeconfig')}",
    ]
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    env["POD_NAMESPACE"] = release.namespace  # the fieldRef a kubelet would resolve
    log = tmp_path / "gpu-controller.log"
    try:
        with running("pkg.app.gpu_controller", args, log_path=log, env=env):
            eventually(lambda: _lease_holder(kube, release), what="the chart's Lease to get a holder")
            eventually(
                lambda: {"DriverReady", "HardwareHealthy"} <= set(_conditions(kube, kept)),
                what="conditions written through physicalgpus/status",
            )
            eventually(lambda: _gone(kube, orphan), what="the PhysicalGPU of a missing node to be deleted")
            eventually(
                lambda: (
                    (meta(kube.get(NODE, node)).labels or {}).get("gpu.deckhouse.io/nvidia.present") == "true"
                ),
                what="the node gate label",
            )
            eventually(
                lambda: (
                    sorted(_daemon_sets(kube, release))
                    == sorted(f"{release.name}-gpu-control-plane-{c}" for c in COMPONENTS)
                ),
                what="the node components' DaemonSets from the chart's ConfigMap",
            )
            eventually(lambda: _valid(kube, gpu_class), what="the GPUClass's DeviceClass")
            eventually(
                lambda: any(
                    e.reason == "NodeGone" and e.regarding and e.regarding.name == orphan
                    for e in kube.list(EVENT, namespace="default")[0]
                ),
                what="the NodeGone event in default",
            )
        assert refused_requests(log) == []
    finally:
        with contextlib.suppress(NotFoundError):
            kube.delete(PHYSICAL_GPU, kept)
        with contextlib.suppress(NotFoundError):
            kube.delete(PHYSICAL_GPU, orphan)
        with contextlib.suppress(NotFoundError):
            kube.delete(NODE, node)
        with contextlib.suppress(NotFoundError):
            kube.delete(GPU_CLASS, gpu_class)
