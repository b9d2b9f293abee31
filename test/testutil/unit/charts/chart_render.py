"""Renders charts/gpu-control-plane with the real ``helm`` binary and picks objects out of the result,
for the chart tests of this folder (imported by bare name); the ``helm`` and ``default_docs`` fixtures
are in this folder's conftest."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from kubernetes.client import V1ConfigMap

from pkg.framework.client.builtin_kinds import DAEMON_SET
from pkg.gpucontroller.orchestrator.internal.config import parse_config
from pkg.gpucontroller.orchestrator.render import RenderContext, render_all

ROOT = Path(__file__).resolve().parents[4]
CHART = ROOT / "charts" / "gpu-control-plane"
VALUES_FILE = CHART / "values.yaml"
README = CHART / "README.md"
CRD_SOURCE_DIR = ROOT / "config" / "crd"
CHART_CRD_DIR = CHART / "files" / "crds"
PLAIN_RBAC = ROOT / "config" / "rbac" / "gpu-controller.yaml"
PLAIN_NODE_AGENT_RBAC = ROOT / "config" / "rbac" / "gpu-node-agent.yaml"
PLAIN_GPU_HANDLER_RBAC = ROOT / "config" / "rbac" / "gpu-handler.yaml"
PLAIN_NODE_POLICY = ROOT / "config" / "admission" / "node-policy.yaml"
UPDATE_ENV = "GPU_CP_UPDATE_GENERATED"

RELEASE = "rel"
NAMESPACE = "gpu-system"
SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"
PROMETHEUS_RULE_API = "monitoring.coreos.com/v1/PrometheusRule"
KEEP_ANNOTATION = "helm.sh/resource-policy"
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")

# Values a template passes on whole (toYaml): they are one value each, documented and checked as
# one; their keys are Kubernetes fields, not chart settings.
OPAQUE_VALUES = frozenset(
    {
        "controller.resources",
        "controller.podSecurityContext",
        "controller.securityContext",
        "draController.resources",
        "draController.podSecurityContext",
        "draController.securityContext",
        "nodeAgent.resources",
        "nodeAgent.tolerations",
        "validator.resources",
        "validator.tolerations",
        "gpuHandler.resources",
        "gpuHandler.tolerations",
        "dcgm.resources",
        "dcgm.tolerations",
        "dcgmExporter.resources",
        "dcgmExporter.tolerations",
    }
)
CLUSTER_SCOPED = frozenset(
    {
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)

# (apiGroup, resource, verb) of every call gpu-controller makes outside its own namespace: the
# informers (list/watch; nothing is read by name), orphan cleanup (delete), metadata JSON patch
# (patch), status writes (its PhysicalGPU conditions by server-side apply: patch), the node gate
# labels (a Node merge patch), GPUClass status and the DeviceClasses generated from them
# (server-side apply: patch, create), ComputeDomains (finalizer patch, status PUT) and their claim
# templates (apply), the claims and slices they read, the finalizers update an owner reference with
# blockOwnerDeletion needs, and events.k8s.io events (create, patch for a series). Nothing else.
CONTROLLER_CLUSTER_PERMISSIONS = frozenset(
    {
        *(("gpu.deckhouse.io", "physicalgpus", verb) for verb in ("list", "watch", "patch", "delete")),
        ("gpu.deckhouse.io", "physicalgpus/status", "patch"),
        *(("", "nodes", verb) for verb in ("list", "watch", "patch")),
        *(("gpu.deckhouse.io", "gpuclasses", verb) for verb in ("list", "watch")),
        ("gpu.deckhouse.io", "gpuclasses/status", "update"),
        ("gpu.deckhouse.io", "gpuclasses/finalizers", "update"),
        *(("resource.k8s.io", "deviceclasses", verb) for verb in ("list", "watch", "create", "patch")),
        *(("gpu.deckhouse.io", "computedomains", verb) for verb in ("list", "watch", "patch")),
        ("gpu.deckhouse.io", "computedomains/status", "update"),
        ("gpu.deckhouse.io", "computedomains/finalizers", "update"),
        *(
            ("resource.k8s.io", "resourceclaimtemplates", verb)
            for verb in ("list", "watch", "create", "patch")
        ),
        *(
            ("resource.k8s.io", kind, verb)
            for kind in ("resourceclaims", "resourceslices")
            for verb in ("list", "watch")
        ),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
    }
)
# (apiGroup, resource, verb, resourceNames) of gpu-controller's calls in the node components'
# namespace: its configuration ConfigMap (only that one), the DaemonSets it renders (informer,
# server-side apply, pruning), the GPU validator's Pods (informer).
CONTROLLER_NODE_COMPONENT_RULES = sorted(
    [
        (("",), ("configmaps",), ("create", "delete", "list", "patch", "watch"), None),
        (
            ("",),
            ("configmaps",),
            ("get", "update"),
            (f"{RELEASE}-gpu-control-plane-compute-domain-channels",),
        ),
        (("",), ("configmaps/finalizers",), ("update",), (f"{RELEASE}-gpu-control-plane",)),
        (("apps",), ("daemonsets",), ("create", "delete", "get", "list", "patch", "watch"), None),
        (("",), ("pods",), ("create", "delete", "list", "watch"), None),
    ]
)


# (apiGroup, resource, verb) of every call gpu-node-agent makes: its two informers (this node's
# PhysicalGPUs by label, this Node by field selector: list and watch), create/merge-patch/delete of
# PhysicalGPUs, server-side apply and JSON patch of their status, the merge patch of Node labels.
# No get (everything is read from the informers) and no events.
NODE_AGENT_PERMISSIONS = frozenset(
    {
        *(
            ("gpu.deckhouse.io", "physicalgpus", verb)
            for verb in ("list", "watch", "create", "patch", "delete")
        ),
        ("gpu.deckhouse.io", "physicalgpus/status", "patch"),
        *(("", "nodes", verb) for verb in ("list", "watch", "patch")),
    }
)
# (apiGroup, resource, verb) of every call gpu-handler makes: its informers (this node's PhysicalGPUs,
# this Node, this node's ResourceSlices), server-side apply and JSON patch of PhysicalGPU status, and
# the publisher's LIST, apply (PATCH, creating a missing slice) and delete of ResourceSlices; get
# only of what a prepare reads by name (the claim, the Pods reserving it); no Node writes.
GPU_HANDLER_PERMISSIONS = frozenset(
    {
        *(("gpu.deckhouse.io", "physicalgpus", verb) for verb in ("list", "watch")),
        ("gpu.deckhouse.io", "physicalgpus/status", "patch"),
        *(
            ("resource.k8s.io", "resourceslices", verb)
            for verb in ("list", "watch", "create", "patch", "delete")
        ),
        *(("", "nodes", verb) for verb in ("list", "watch")),
        ("resource.k8s.io", "resourceclaims", "get"),
        ("gpu.deckhouse.io", "computedomains", "get"),  # an IMEX channel's domain, read at Prepare
        ("", "pods", "get"),  # the Pods reserving a claim: their gpu.deckhouse.io/vfio annotation
        ("", "pods", "list"),  # this node's Pods, for the per-Pod attribution
        ("", "pods", "watch"),
        ("resource.k8s.io", "resourceclaims/status", "patch"),  # DeviceUsage in status.devices
        ("resource.k8s.io", "resourceclaims/driver", "associated-node:patch"),
        *(("events.k8s.io", "events", verb) for verb in ("create", "patch")),
    }
)
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


# -- rendering ---------------------------------------------------------------------------------------


def run_helm(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(helm), *args], capture_output=True, text=True, check=False, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result


def set_flags(values: Mapping[str, Any]) -> list[str]:
    """``--set-json path=value`` for each dotted path, so strings, lists and objects keep their type."""
    flags: list[str] = []
    for path, value in values.items():
        flags += ["--set-json", f"{path}={json.dumps(value)}"]
    return flags


def template_text(
    helm: Path,
    values: Mapping[str, Any] | None = None,
    *,
    api_versions: tuple[str, ...] = (),
    show_only: tuple[str, ...] = (),
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> str:
    values = dict(values or {})
    if not any(path.startswith("metricsProxy") for path in values):
        # These tests pin each component's own endpoint; the default, kube-rbac-proxy in front of
        # it, is what test_chart_metrics_proxy.py pins.
        values["metricsProxy.enabled"] = False
    args = ["template", release, str(CHART), "--namespace", namespace, *set_flags(values)]
    for api in api_versions:
        args += ["--api-versions", api]
    for template in show_only:
        args += ["--show-only", template]
    return run_helm(helm, *args).stdout


def render(
    helm: Path, values: Mapping[str, Any] | None = None, *, api_versions: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    text = template_text(helm, values, api_versions=api_versions)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = find(docs, kind)
    return doc


def of(docs: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    """The objects of one component (label app.kubernetes.io/component)."""
    return [doc for doc in docs if doc["metadata"]["labels"].get("app.kubernetes.io/component") == component]


def node_daemon_sets(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The DaemonSets gpu-controller renders from the chart's configuration ConfigMap, by component:
    the document is parsed by the controller's own parser and rendered by its own renderer."""
    document = one(of(docs, "node-components"), "ConfigMap")
    config_map = V1ConfigMap.model_validate(
        {**document, "metadata": {**document["metadata"], "uid": "uid-of-the-configmap"}}
    )
    context = RenderContext(config_map=config_map, spec=parse_config(config_map))
    return {component.value: DAEMON_SET.encode(ds) for component, ds in render_all(context).items()}


def leader_election(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """gpu-controller's leader-election Role or RoleBinding."""
    (doc,) = [
        d
        for d in find(of(docs, "gpu-controller"), kind)
        if d["metadata"]["name"].endswith("-leader-election")
    ]
    return doc


def container(docs: list[dict[str, Any]], component: str = "gpu-controller") -> dict[str, Any]:
    containers = one(of(docs, component), "Deployment")["spec"]["template"]["spec"]["containers"]
    (main,) = [c for c in containers if c["name"] == component]  # beside it: kube-rbac-proxy
    return dict(main)


def env_of(docs: list[dict[str, Any]], component: str = "gpu-controller") -> dict[str, Any]:
    return {
        item["name"]: item.get("value", item.get("valueFrom")) for item in container(docs, component)["env"]
    }


def flag(docs: list[dict[str, Any]], name: str, component: str = "gpu-controller") -> str:
    args = container(docs, component)["args"]
    values = [arg.split("=", 1)[1] for arg in args if arg.startswith(f"--{name}=")]
    assert len(values) == 1, f"--{name} given {len(values)} times"
    return str(values[0])


def granted_by(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    granted = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        granted |= {
            (group, resource, verb)
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
    return granted


def install_notes(helm: Path, values: Mapping[str, Any]) -> str:
    """NOTES.txt as ``helm install --dry-run`` prints it (no cluster: no ServiceMonitor API)."""
    result = run_helm(
        helm, "install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE, *set_flags(values)
    )
    return result.stdout.split("NOTES:", 1)[1]


def daemonset(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """gpu-node-agent's DaemonSet, as gpu-controller renders it from the chart's ConfigMap."""
    return node_daemon_sets(docs)["gpu-node-agent"]


def confined_users(policy: dict[str, Any]) -> list[str]:
    """The usernames of the policy's matchCondition ``request.userInfo.username in [...]``."""
    (condition,) = policy["spec"]["matchConditions"]
    prefix = "request.userInfo.username in "
    assert condition["expression"].startswith(prefix), condition
    users: list[str] = json.loads(condition["expression"][len(prefix) :])
    return users


def render_plain(helm: Path, header: str, templates: tuple[str, ...]) -> str:
    """``templates`` rendered as plain manifests (see :func:`render_plain_rbac`) after ``header``."""
    text = template_text(
        helm, release="gpu-control-plane", namespace="gpu-control-plane", show_only=templates
    )
    helm_only = re.compile(r"^\s*(# Source: .*|(" + "|".join(map(re.escape, HELM_ONLY_LABELS)) + r"): .*)$")
    documents = []
    for chunk in re.split(r"^---\s*$", text, flags=re.MULTILINE):
        lines = [line.rstrip() for line in chunk.splitlines() if not helm_only.match(line)]
        body = "\n".join(lines).strip("\n")
        if body:
            documents.append(body + "\n")
    return header + "".join("---\n" + doc for doc in documents)


def _check_or_update(path: Path, expected: str) -> None:
    """Asserts ``path`` holds ``expected``; with GPU_CP_UPDATE_GENERATED=1 writes it first."""
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != expected:
            path.write_text(expected, encoding="utf-8")
    actual = path.read_text(encoding="utf-8") if path.exists() else None
    assert actual == expected, (
        f"{path.relative_to(ROOT)} is stale: regenerate it with "
        f"{UPDATE_ENV}=1 .venv/bin/pytest test/unit/charts -q"
    )


def options_of_the_binary(app: ModuleType, args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The :class:`~pkg.app.options.ManagerOptions` the component's own parser (``app``, e.g.
    ``pkg.app.gpu_controller``) makes of ``args``; the run stops right after parsing, before any
    connection."""
    from pkg.app.options import manager_options

    captured: list[Any] = []

    def capture(namespace: Any) -> Any:
        captured.append(manager_options(namespace))
        raise SystemExit(0)

    monkeypatch.setattr(app, "manager_options", capture)
    with pytest.raises(SystemExit):
        app.main(args)
    return captured[0]


def assert_hardened(pod_spec: dict[str, Any], main: dict[str, Any]) -> None:
    """A controller Pod runs hardened: non-root, no host namespaces, a read-only root filesystem
    (with a writable /tmp for Python), no capabilities, RuntimeDefault seccomp."""
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["runAsUser"] != 0
    assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for host_namespace in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod_spec.get(host_namespace), host_namespace
    security = main["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in security
    assert {"name": "tmp", "mountPath": "/tmp"} in main["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}} in pod_spec["volumes"]
