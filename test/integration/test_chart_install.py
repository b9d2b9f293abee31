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
The RBAC questions are in ``test_chart_install_rbac.py``; the release and its helpers in
``chart_install.py``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import V1ObjectMeta
from testutil.integration.chart_install import (
    COMPONENTS,
    LEASE_NAME,
    Release,
    helm_template,
    release,
)
from testutil.integration.dra_objects import create_ready_node
from testutil.integration.process_helpers import eventually, refused_requests, running
from testutil.k8s_fields import meta, name_of

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, GPUClass, PhysicalGPU
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.processes import free_port
from pkg.domain.kinds import GPU_CLASS, PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DAEMON_SET, EVENT, LEASE, NODE

__all__ = ["release"]  # the fixture, from chart_install

pytestmark = pytest.mark.dra_api


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
            # ClaimExplanations for namespace users: aggregated into edit/admin and view, bound to nobody
            f"clusterrole.rbac.authorization.k8s.io/{release.name}-gpu-control-plane-claim-explanation-edit",
            f"clusterrole.rbac.authorization.k8s.io/{release.name}-gpu-control-plane-claim-explanation-view",
            f"validatingadmissionpolicy.admissionregistration.k8s.io/{policy}",
            f"validatingadmissionpolicybinding.admissionregistration.k8s.io/{policy}",
        ]
    )


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
