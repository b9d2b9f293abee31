"""The chart's RBAC asked of the real API server: ``kubectl auth can-i`` and a SelfSubjectRulesReview as
gpu-controller's and gpu-dra-controller's ServiceAccounts (the release from ``chart_install``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from testutil.integration.chart_install import (
    DRA_LEASE_NAME,
    LEASE_NAME,
    LEDGER_NAME,
    Release,
    impersonate,
    release,
)

from pkg.devcluster.cluster import ControlPlane
from pkg.dracontroller.accounting.ledger import SHARDS

__all__ = ["release"]  # the fixture, from chart_install

pytestmark = pytest.mark.dra_api


def can_i(control_plane: ControlPlane, release: Release, verb: str, resource: str, *extra: str) -> bool:
    out = control_plane.kubectl("auth", "can-i", verb, resource, *extra, *impersonate(release), check=False)
    answer = out.strip().split()[0] if out.strip() else ""
    assert answer in ("yes", "no"), f"can-i {verb} {resource} {extra}: {out!r}"
    return answer == "yes"


# (verb, resource, extra kubectl flags); "{ns}" is the release namespace.
NEEDED = [
    *((verb, "physicalgpus.gpu.deckhouse.io", ()) for verb in ("list", "watch", "patch", "delete")),
    ("patch", "physicalgpus.gpu.deckhouse.io", ("--subresource=status",)),  # its conditions, applied
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
    # Compute domains: the domains, their claim templates, the claims and slices they read, and in
    # the release namespace the IMEX daemons' Pods and ConfigMaps (found by label, so not by name)
    # and the channel ledger (by name).
    *((verb, "computedomains.gpu.deckhouse.io", ()) for verb in ("list", "watch", "patch")),
    ("update", "computedomains.gpu.deckhouse.io", ("--subresource=status",)),
    ("update", "computedomains.gpu.deckhouse.io", ("--subresource=finalizers",)),
    *((verb, "resourceclaimtemplates.resource.k8s.io", ()) for verb in ("list", "watch", "create", "patch")),
    *((verb, "resourceclaims.resource.k8s.io", ()) for verb in ("list", "watch")),
    *((verb, "resourceslices.resource.k8s.io", ()) for verb in ("list", "watch")),
    *((verb, "pods", ("-n", "{ns}")) for verb in ("create", "delete")),
    *((verb, "configmaps", ("-n", "{ns}")) for verb in ("list", "watch", "create", "patch", "delete")),
    *((verb, "configmaps/{config}-compute-domain-channels", ("-n", "{ns}")) for verb in ("get", "update")),
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
    ("update", "physicalgpus.gpu.deckhouse.io", ("--subresource=status",)),  # applied, never PUT
    ("deletecollection", "physicalgpus.gpu.deckhouse.io", ()),
    ("update", "gpuclasses.gpu.deckhouse.io", ()),
    ("delete", "gpuclasses.gpu.deckhouse.io", ()),
    ("delete", "deviceclasses.resource.k8s.io", ()),
    ("update", "deviceclasses.resource.k8s.io", ()),
    ("delete", "nodes", ()),
    ("update", "nodes", ()),
    # ConfigMaps by name only its own ledger, only in its namespace (the IMEX daemons' are listed by
    # label there); DaemonSets and Pods nowhere else.
    ("get", "configmaps/someone-elses-config", ("-n", "{ns}")),
    ("list", "configmaps", ("--all-namespaces",)),
    ("update", "configmaps/{config}", ("-n", "{ns}")),
    ("get", "configmaps/{config}", ("-n", "default")),
    ("create", "daemonsets.apps", ("-n", "default")),
    ("list", "pods", ("--all-namespaces",)),
    ("delete", "pods", ("-n", "default")),
    ("patch", "nodes", ("--subresource=status",)),
    ("get", "secrets", ("-n", "{ns}")),
    ("update", "secrets", ("-n", "{ns}")),
    ("list", "secrets", ("--all-namespaces",)),
    ("create", "pods", ("-n", "default")),
    ("update", "pods", ("-n", "{ns}")),
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
        ("gpu.deckhouse.io", "physicalgpus/status", "patch", "<any>"),
        *(("", "nodes", verb, "<any>") for verb in ("list", "watch", "patch")),
        *(("gpu.deckhouse.io", "gpuclasses", verb, "<any>") for verb in ("list", "watch")),
        ("gpu.deckhouse.io", "gpuclasses/status", "update", "<any>"),
        ("gpu.deckhouse.io", "gpuclasses/finalizers", "update", "<any>"),
        *(
            ("resource.k8s.io", "deviceclasses", verb, "<any>")
            for verb in ("list", "watch", "create", "patch")
        ),
        *(("", "configmaps", verb, "<any>") for verb in ("list", "watch", "create", "patch", "delete")),
        *(
            ("", "configmaps", verb, f"{release.name}-gpu-control-plane-compute-domain-channels")
            for verb in ("get", "update")
        ),
        ("", "configmaps/finalizers", "update", f"{release.name}-gpu-control-plane"),
        *(("gpu.deckhouse.io", "computedomains", verb, "<any>") for verb in ("list", "watch", "patch")),
        ("gpu.deckhouse.io", "computedomains/status", "update", "<any>"),
        ("gpu.deckhouse.io", "computedomains/finalizers", "update", "<any>"),
        *(
            ("resource.k8s.io", "resourceclaimtemplates", verb, "<any>")
            for verb in ("list", "watch", "create", "patch")
        ),
        *(
            ("resource.k8s.io", resource, verb, "<any>")
            for resource in ("resourceclaims", "resourceslices")
            for verb in ("list", "watch")
        ),
        *(
            ("apps", "daemonsets", verb, "<any>")
            for verb in ("get", "list", "watch", "create", "patch", "delete")
        ),
        *(("", "pods", verb, "<any>") for verb in ("list", "watch", "create", "delete")),
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
LEDGER_MAPS = [LEDGER_NAME, *(f"{LEDGER_NAME}-{i}" for i in range(SHARDS))]  # the head and its parts
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
    *((verb, f"configmaps/{name}", ("-n", "{ns}")) for verb in ("get", "update") for name in LEDGER_MAPS),
    # ClaimExplanations it answers: an informer, a status apply, a delete after the TTL.
    *((verb, "claimexplanations.gpu.deckhouse.io", ()) for verb in ("list", "watch")),
    ("delete", "claimexplanations.gpu.deckhouse.io", ("-n", "{ns}")),
    ("patch", "claimexplanations.gpu.deckhouse.io", ("--subresource=status", "-n", "{ns}")),
]

DRA_FORBIDDEN = [
    # Claims come from the informer: none is read by name (the e2e tier's RBAC audit found no get).
    ("get", "resourceclaims.resource.k8s.io", ("-n", "{ns}")),
    # ClaimExplanations are created by users; only their status is the controller's to write.
    ("create", "claimexplanations.gpu.deckhouse.io", ("-n", "{ns}")),
    ("update", "claimexplanations.gpu.deckhouse.io", ("-n", "{ns}")),
    ("patch", "claimexplanations.gpu.deckhouse.io", ("-n", "{ns}")),
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
    ("update", f"configmaps/{LEDGER_NAME}-{SHARDS}", ("-n", "{ns}")),  # one past the last part
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
        *(("gpu.deckhouse.io", "claimexplanations", verb, "<any>") for verb in ("list", "watch", "delete")),
        ("gpu.deckhouse.io", "claimexplanations/status", "patch", "<any>"),
        ("", "configmaps", "create", "<any>"),
        *(("", "configmaps", verb, name) for verb in ("get", "update") for name in LEDGER_MAPS),
        *METRICS_PROXY_REVIEWS,
    }
