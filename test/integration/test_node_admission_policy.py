"""The chart's node admission policy on a real API server: node components write only their own node.

The chart's gpu-node-agent ServiceAccount, ClusterRole and ValidatingAdmissionPolicy
(``templates/node-admission-policy.yaml``) are rendered with ``helm template`` and applied; the
policy also lists a second account, standing in for gpu-handler (``admissionPolicy.serviceAccounts``),
which a test-only ClusterRole lets write ResourceSlices (an extra account proves the list value works;
the chart's own gpu-handler account is confined by default and covered by the chart tests).

The node a request comes from is the one in its token: a TokenRequest bound to a Pod whose
``spec.nodeName`` is set carries the user extra ``authentication.kubernetes.io/node-name``
(ServiceAccountTokenPodNodeInfo, GA since 1.32), exactly like the token the kubelet mounts into a
DaemonSet Pod. No kubelet runs here, so those Pods are created already bound and never start; each
test authenticates with such a token and the API server's own answer (403 from the policy, with its
message) is what is checked. The last test runs gpu-node-agent itself with that token, the chart's
RBAC and the policy in force, and expects its whole sync to go through.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import subprocess
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import (
    ApiClient,
    Configuration,
    V1Container,
    V1Namespace,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
    V1ServiceAccount,
)
from testutil.extra_kinds import SERVICE_ACCOUNT
from testutil.integration.dra_objects import DRIVER, create_ready_node
from testutil.integration.process_helpers import eventually, refused_requests, running
from testutil.k8s_fields import meta, name_of, present, uid_of

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.devcluster.processes import free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import ApiError, KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import NAMESPACE, NODE, POD, RESOURCE_SLICE
from pkg.hardware.labels import to_label_value

pytestmark = pytest.mark.dra_api

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gpu-control-plane"
FIXTURES = ROOT / "test" / "fixtures"
TEMPLATES = (
    "templates/gpu-node-agent-serviceaccount.yaml",
    "templates/gpu-node-agent-rbac.yaml",
    "templates/node-admission-policy.yaml",
)
HANDLER_SA = "gpu-handler"  # listed in admissionPolicy.serviceAccounts
OTHER_SA = "not-a-node-component"  # the same ResourceSlice rights, not listed: not confined


@dataclass
class Cluster:
    """What the module installed, and a factory of clients authenticated as node components."""

    control_plane: ControlPlane
    admin: KubeClient
    namespace: str
    release: str
    agent_sa: str
    policy: str
    node_a: str
    node_b: str
    pods: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    def token(self, account: str, *, node: str | None) -> str:
        """A TokenRequest for ``account``: bound to a new Pod on ``node``, or unbound when None."""
        spec: dict[str, Any] = {"expirationSeconds": 3600}
        if node is not None:
            pod = self.admin.create(
                POD,
                V1Pod(
                    metadata=V1ObjectMeta(
                        name=f"{account[:40]}-{uuid.uuid4().hex[:8]}", namespace=self.namespace
                    ),
                    spec=V1PodSpec(
                        node_name=node,  # bound at creation, as the scheduler would have done
                        service_account_name=account,
                        automount_service_account_token=False,
                        containers=[V1Container(name="main", image="registry.invalid/never:0")],
                    ),
                ),
            )
            self.pods.append(name_of(pod))
            spec["boundObjectRef"] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": name_of(pod),
                "uid": uid_of(pod),
            }
        review = self.admin.raw(
            "POST",
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        return str(review["status"]["token"])

    def client(self, account: str, *, node: str | None) -> KubeClient:
        configuration = Configuration()
        configuration.host = self.control_plane.server_url
        configuration.ssl_ca_cert = str(present(self.control_plane.pki).ca_cert)
        configuration.api_key = {"authorization": f"Bearer {self.token(account, node=node)}"}
        return KubeClient(ApiClient(configuration), field_manager="gpu-node-agent")

    def denied(self, call: Callable[[], object]) -> str:
        """Runs ``call``, expects the policy's 403 and returns its message."""
        with pytest.raises(ApiError) as info:
            call()
        error = info.value
        assert (error.status, error.reason) == (403, "Forbidden"), error
        assert f"ValidatingAdmissionPolicy '{self.policy}'" in error.message, error.message
        return error.message

    def new_node(self, name: str) -> str:
        create_ready_node(self.admin, name)
        self.nodes.append(name)
        return name


def _helm_template(release: str, namespace: str, values: dict[str, Any]) -> str:
    args = [str(default_bin_dir() / "helm"), "template", release, str(CHART), "--namespace", namespace]
    for path, value in values.items():
        args += ["--set-json", f"{path}={json.dumps(value)}"]
    for template in TEMPLATES:
        args += ["--show-only", template]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _test_role(name: str, namespace: str) -> str:
    """Lets the gpu-handler stand-in and the unlisted account write ResourceSlices."""
    subjects = [
        {"kind": "ServiceAccount", "name": sa, "namespace": namespace} for sa in (HANDLER_SA, OTHER_SA)
    ]
    return yaml.safe_dump_all(
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "resources": ["resourceslices"],
                        "verbs": ["get", "create", "update", "patch", "delete"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            },
        ]
    )


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane, kube: KubeClient) -> Iterator[Cluster]:
    unique = uuid.uuid4().hex[:8]
    release = f"nap-{unique}"
    namespace = f"t-nap-{unique}"
    state = Cluster(
        control_plane=control_plane,
        admin=kube,
        namespace=namespace,
        release=release,
        agent_sa=f"{release}-gpu-control-plane-gpu-node-agent",
        policy=f"{release}-gpu-control-plane-node-scope",
        node_a=f"node-a-{unique}",
        node_b=f"node-b-{unique}",
    )
    test_role = f"{release}-test-resourceslices"
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=namespace)))
    try:
        control_plane.kubectl(
            "apply",
            "--server-side",
            f"--field-manager=helm-{release}",
            "-f",
            "-",
            input_text=_helm_template(
                release,
                namespace,
                {"crds.install": False, "admissionPolicy.serviceAccounts": [{"name": HANDLER_SA}]},
            ),
        )
        for account in (HANDLER_SA, OTHER_SA):
            kube.create(
                SERVICE_ACCOUNT, V1ServiceAccount(metadata=V1ObjectMeta(name=account, namespace=namespace))
            )
        control_plane.kubectl(
            "apply", "--server-side", "-f", "-", input_text=_test_role(test_role, namespace)
        )
        state.new_node(state.node_a)
        state.new_node(state.node_b)
        # The policy takes effect once the API server's policy informer has it: wait with a dry run.
        agent = state.client(state.agent_sa, node=state.node_a)
        eventually(lambda: _dry_run_denied(agent, state), timeout=30, what="the policy to be enforced")
        yield state
    finally:
        for (
            pod
        ) in state.pods:  # bound to nodes without a kubelet: nothing would ever confirm a graceful delete
            with contextlib.suppress(NotFoundError):
                kube.raw(
                    "DELETE",
                    f"/api/v1/namespaces/{namespace}/pods/{pod}",
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                )
        with contextlib.suppress(NotFoundError):
            kube.delete(NAMESPACE, namespace)
        for node in state.nodes:
            for gpu in kube.list(PHYSICAL_GPU, label_selector=f"{LABEL_NODE}={to_label_value(node)}")[0]:
                with contextlib.suppress(NotFoundError):
                    kube.delete(PHYSICAL_GPU, str(gpu.metadata.name))
            for item in kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node}")[0]:
                with contextlib.suppress(NotFoundError):
                    kube.delete(RESOURCE_SLICE, name_of(item))
            with contextlib.suppress(NotFoundError):
                kube.delete(NODE, node)
        control_plane.kubectl(
            "delete",
            "clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
            "-l",
            f"app.kubernetes.io/instance={release}",
            "--ignore-not-found",
            "--wait=false",
        )
        control_plane.kubectl(
            "delete", "clusterrole,clusterrolebinding", test_role, "--ignore-not-found", "--wait=false"
        )


def _gpu(name: str, node_label: str | None) -> PhysicalGPU:
    labels = {LABEL_NODE: node_label} if node_label is not None else {}
    return PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels))


def _dry_run_denied(agent: KubeClient, cluster: Cluster) -> bool:
    body = PHYSICAL_GPU.encode(_gpu(f"{cluster.node_b}-probe", cluster.node_b))
    try:
        agent.raw("POST", "/apis/gpu.deckhouse.io/v1alpha1/physicalgpus?dryRun=All", body=body)
    except ApiError as error:
        return cluster.policy in error.message
    return False


def _slice(name: str, node: str | None, *, all_nodes: bool = False) -> V1ResourceSlice:
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name=name),
        spec=V1ResourceSliceSpec(
            driver=DRIVER,
            pool=V1ResourcePool(name=f"pool-{name}", generation=1, resource_slice_count=1),
            node_name=node,
            all_nodes=True if all_nodes else None,
            devices=[],
        ),
    )


# -- PhysicalGPUs ---------------------------------------------------------------------------------------


def test_agent_writes_physicalgpus_of_its_own_node(cluster: Cluster) -> None:
    agent = cluster.client(cluster.agent_sa, node=cluster.node_a)
    name = f"{cluster.node_a}-0-10de-20b7"
    created = agent.create(PHYSICAL_GPU, _gpu(name, cluster.node_a))
    agent.patch(
        PHYSICAL_GPU,
        name,
        {"metadata": {"uid": created.metadata.uid, "labels": {"gpu.deckhouse.io/vendor": "nvidia"}}},
        patch_type=PatchType.MERGE,
    )
    stored = agent.apply(
        PHYSICAL_GPU,
        {"metadata": {"name": name}, "status": {"nodeInfo": {"nodeName": cluster.node_a}}},
        subresource="status",
    )
    assert stored.status is not None
    assert stored.status.node_info is not None
    assert stored.status.node_info.node_name == cluster.node_a
    agent.delete(PHYSICAL_GPU, name, uid=created.metadata.uid)


def test_agent_may_not_create_physicalgpus_of_another_node(cluster: Cluster) -> None:
    agent = cluster.client(cluster.agent_sa, node=cluster.node_a)
    message = cluster.denied(
        lambda: agent.create(PHYSICAL_GPU, _gpu(f"{cluster.node_b}-0-10de-20b7", cluster.node_b))
    )
    expected = f"runs on node {cluster.node_a} and may only write PhysicalGPUs labelled {LABEL_NODE}="
    assert expected + cluster.node_a in message
    assert f"is labelled gpu.deckhouse.io/node={cluster.node_b}" in message
    message = cluster.denied(lambda: agent.create(PHYSICAL_GPU, _gpu(f"{cluster.node_a}-9-10de-20b7", None)))
    assert "has no gpu.deckhouse.io/node label" in message


def test_agent_may_not_touch_physicalgpus_of_another_node(cluster: Cluster) -> None:
    theirs = f"{cluster.node_b}-1-10de-20b7"
    cluster.admin.create(PHYSICAL_GPU, _gpu(theirs, cluster.node_b))
    agent = cluster.client(cluster.agent_sa, node=cluster.node_a)
    # Relabelling it to the agent's own node does not help: the old object is checked too.
    message = cluster.denied(
        lambda: agent.patch(
            PHYSICAL_GPU,
            theirs,
            {"metadata": {"labels": {LABEL_NODE: cluster.node_a}}},
            patch_type=PatchType.MERGE,
        )
    )
    assert f"may not change PhysicalGPU {theirs} of gpu.deckhouse.io/node={cluster.node_b}" in message
    message = cluster.denied(
        lambda: agent.apply(
            PHYSICAL_GPU,
            {"metadata": {"name": theirs}, "status": {"nodeInfo": {"nodeName": "x"}}},
            subresource="status",
        )
    )
    assert f"may not change PhysicalGPU {theirs}" in message
    message = cluster.denied(lambda: agent.delete(PHYSICAL_GPU, theirs))
    assert f"may not delete PhysicalGPU {theirs} of gpu.deckhouse.io/node={cluster.node_b}" in message
    # Nor can it give one of its own away.
    mine = f"{cluster.node_a}-1-10de-20b7"
    agent.create(PHYSICAL_GPU, _gpu(mine, cluster.node_a))
    message = cluster.denied(
        lambda: agent.patch(
            PHYSICAL_GPU,
            mine,
            {"metadata": {"labels": {LABEL_NODE: cluster.node_b}}},
            patch_type=PatchType.MERGE,
        )
    )
    assert f"is labelled gpu.deckhouse.io/node={cluster.node_b}" in message
    agent.delete(PHYSICAL_GPU, mine)
    cluster.admin.delete(PHYSICAL_GPU, theirs)  # the admin is not confined


@pytest.mark.parametrize(
    "prefix",
    [
        "n--double--dashes",  # the label collapses runs of "-"
        "n-" + "long." * 14,  # over 63 characters: a prefix and a hash
        # Over 63 characters, and the 54-character cut ends in "." or (after collapsing) "-",
        # which the label drops.
        "n-" + "l" * 51 + ".x" + "y" * 20,
        "n--" + "l" * 51 + "--x" + "y" * 20,
    ],
    ids=["dashes", "long", "long-cut-at-dot", "long-cut-at-dashes"],
)
def test_node_names_are_compared_as_the_agent_labels_them(cluster: Cluster, prefix: str) -> None:
    node = cluster.new_node(f"{prefix}{uuid.uuid4().hex[:8]}")
    label = to_label_value(node)
    assert label != node
    agent = cluster.client(cluster.agent_sa, node=node)
    agent.create(PHYSICAL_GPU, _gpu(f"gpu-{uuid.uuid4().hex[:8]}", label))
    # The raw node name is not the label, and a label of another long name is refused.
    cluster.denied(
        lambda: agent.create(PHYSICAL_GPU, _gpu(f"gpu-{uuid.uuid4().hex[:8]}", node[:63].rstrip("-.")))
    )
    other = to_label_value("m" + node[1:])
    message = cluster.denied(lambda: agent.create(PHYSICAL_GPU, _gpu(f"gpu-{uuid.uuid4().hex[:8]}", other)))
    assert f"is labelled gpu.deckhouse.io/node={other}" in message


# -- Nodes ----------------------------------------------------------------------------------------------


def test_agent_labels_only_its_own_node(cluster: Cluster) -> None:
    agent = cluster.client(cluster.agent_sa, node=cluster.node_a)
    labels = {"gpu.deckhouse.io/os.id": "ubuntu", "gpu.deckhouse.io/baremetal": "true"}
    stored = agent.patch(NODE, cluster.node_a, {"metadata": {"labels": labels}}, patch_type=PatchType.MERGE)
    assert labels.items() <= (meta(stored).labels or {}).items()
    agent.patch(
        NODE,
        cluster.node_a,
        {"metadata": {"labels": {"gpu.deckhouse.io/baremetal": None}}},
        patch_type=PatchType.MERGE,
    )

    message = cluster.denied(
        lambda: agent.patch(
            NODE, cluster.node_b, {"metadata": {"labels": labels}}, patch_type=PatchType.MERGE
        )
    )
    assert (
        f"runs on node {cluster.node_a} and may only update its own Node, not update Node {cluster.node_b}"
        in message
    )
    # Its own Node, but nothing that would steer workloads to it.
    for patch in (
        {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
        {"metadata": {"labels": {"kubernetes.io/hostname": "elsewhere"}}},
        {"metadata": {"annotations": {"example.com/x": "y"}}},
        {"spec": {"unschedulable": True}},
        {"spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}},
    ):
        message = cluster.denied(
            functools.partial(agent.patch, NODE, cluster.node_a, patch, patch_type=PatchType.MERGE)
        )
        assert f"may change only gpu.deckhouse.io/ labels of Node {cluster.node_a}" in message


# -- ResourceSlices (the gpu-handler stand-in from admissionPolicy.serviceAccounts) ------------------------


def test_listed_account_writes_resourceslices_of_its_own_node_only(cluster: Cluster) -> None:
    handler = cluster.client(HANDLER_SA, node=cluster.node_a)
    suffix = uuid.uuid4().hex[:8]
    mine = handler.create(RESOURCE_SLICE, _slice(f"{cluster.node_a}-{suffix}", cluster.node_a))
    message = cluster.denied(
        lambda: handler.create(RESOURCE_SLICE, _slice(f"{cluster.node_b}-{suffix}", cluster.node_b))
    )
    assert f"may only write ResourceSlices with spec.nodeName {cluster.node_a}" in message
    assert f"has spec.nodeName {cluster.node_b}" in message
    message = cluster.denied(
        lambda: handler.create(RESOURCE_SLICE, _slice(f"all-{suffix}", None, all_nodes=True))
    )
    assert "has no spec.nodeName" in message
    theirs = cluster.admin.create(RESOURCE_SLICE, _slice(f"{cluster.node_b}-{suffix}", cluster.node_b))
    message = cluster.denied(lambda: handler.delete(RESOURCE_SLICE, name_of(theirs)))
    assert f"may not delete ResourceSlice {name_of(theirs)} of node {cluster.node_b}" in message
    handler.delete(RESOURCE_SLICE, name_of(mine))
    cluster.admin.delete(RESOURCE_SLICE, name_of(theirs))


def test_accounts_not_listed_are_not_confined(cluster: Cluster) -> None:
    other = cluster.client(OTHER_SA, node=cluster.node_a)
    created = other.create(RESOURCE_SLICE, _slice(f"{cluster.node_b}-{uuid.uuid4().hex[:8]}", cluster.node_b))
    other.delete(RESOURCE_SLICE, name_of(created))


# -- tokens that name no node ---------------------------------------------------------------------------


def test_token_without_a_node_is_refused(cluster: Cluster) -> None:
    for account, call in (
        (
            cluster.agent_sa,
            lambda c: c.create(PHYSICAL_GPU, _gpu(f"{cluster.node_a}-7-10de-20b7", cluster.node_a)),
        ),
        (
            cluster.agent_sa,
            lambda c: c.patch(
                NODE,
                cluster.node_a,
                {"metadata": {"labels": {"gpu.deckhouse.io/os.id": "x"}}},
                patch_type=PatchType.MERGE,
            ),
        ),
        (
            HANDLER_SA,
            lambda c: c.create(
                RESOURCE_SLICE, _slice(f"{cluster.node_a}-{uuid.uuid4().hex[:8]}", cluster.node_a)
            ),
        ),
    ):
        unbound = cluster.client(account, node=None)
        message = cluster.denied(functools.partial(call, unbound))
        assert f"system:serviceaccount:{cluster.namespace}:{account} may write" in message
        assert (
            "this token names no node (user extra authentication.kubernetes.io/node-name is missing)"
            in message
        )


# -- gpu-node-agent itself ------------------------------------------------------------------------------


def _kubeconfig(cluster: Cluster, token: str, path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {
                    "server": cluster.control_plane.server_url,
                    "certificate-authority": str(present(cluster.control_plane.pki).ca_cert),
                },
            }
        ],
        "users": [{"name": "agent", "user": {"token": token}}],
        "contexts": [{"name": "agent", "context": {"cluster": "test", "user": "agent"}}],
        "current-context": "agent",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def test_gpu_node_agent_syncs_with_the_chart_rbac_under_the_policy(cluster: Cluster, tmp_path: Path) -> None:
    node = cluster.new_node(f"agent-{uuid.uuid4().hex[:8]}")
    token = cluster.token(cluster.agent_sa, node=node)
    host = FIXTURES / "sysfs" / "a30-x2"
    port = free_port()
    args = [
        f"--node-name={node}",
        f"--sysfs-root={host}",
        f"--host-root={host}",
        f"--pci-ids={FIXTURES / 'pci.ids'}",
        "--resync-period=2s",
        f"--kubeconfig={_kubeconfig(cluster, token, tmp_path / 'agent.kubeconfig')}",
        f"--metrics-bind-address=127.0.0.1:{port}",
        "--udev=false",
    ]
    log = tmp_path / "agent.log"

    def synced() -> bool:
        gpus = cluster.admin.list(PHYSICAL_GPU, label_selector=f"{LABEL_NODE}={node}")[0]
        labels = meta(cluster.admin.get(NODE, node)).labels or {}
        written = [gpu for gpu in gpus if gpu.status is not None and gpu.status.pci_info is not None]
        return len(written) == 2 and "gpu.deckhouse.io/kernel.version" in labels

    def syncs() -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        match = re.search(
            r"^gpu_node_agent_sync_duration_seconds_count(?:\{.*\})? (\S+)$", text, re.MULTILINE
        )
        return float(match.group(1)) if match else 0.0

    with running("pkg.app.gpu_node_agent", args, log_path=log):
        eventually(synced, timeout=60, what="the agent's PhysicalGPUs and Node labels")
        # Steady state too: two more complete passes (resyncs every 2 s) once everything exists.
        done = syncs()
        eventually(lambda: syncs() >= done + 2, what="two more syncs")
    assert refused_requests(log) == []
