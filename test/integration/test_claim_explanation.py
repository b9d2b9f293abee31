"""``kubectl gpu explain`` served by gpu-dra-controller, against the real API server.

A namespace user with the ``edit`` rights the chart aggregates (the chart's
``claim-explanation-edit`` ClusterRole, bound in the namespace: the test control plane runs no
clusterrole-aggregation controller, so ``edit`` itself would have no rules here) and ``view``
creates a ClaimExplanation through ``kubectl gpu explain``; gpu-dra-controller (a process, its own
for this module, with a short ``--explanation-ttl``) answers it, and the plugin prints the same
report ``--local`` computes, exits alike and deletes its request. A request nobody deletes is
deleted by the controller once the TTL has passed.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes.client import V1ObjectMeta
from testutil.integration.dra_controller_process import GpuNode, gpu_node, new_claim
from testutil.integration.process_helpers import eventually, running
from testutil.kubectl_gpu_user import CHART, User, bind_viewer_role, namespace_user

from api.gpu.v1alpha1 import ClaimExplanation, ClaimExplanationSpec, ExplanationOutcome
from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.devcluster.processes import free_port, ready
from pkg.domain.kinds import CLAIM_EXPLANATION
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import NAMESPACE, RESOURCE_CLAIM

__all__ = ["gpu_node"]  # fixture, imported to be used here

pytestmark = pytest.mark.dra_api

TTL_SECONDS = 3
COMPONENT = "claim-explanation"  # the chart's label on its ClaimExplanation ClusterRoles


@pytest.fixture(scope="module")
def explaining_controller(
    kube: KubeClient, kubeconfig: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """gpu-dra-controller for this module, answering ClaimExplanations with a short TTL."""
    lease_ns = "dra-controller-lease"
    with contextlib.suppress(Exception):
        kube.create(NAMESPACE, NAMESPACE.decode({"metadata": {"name": lease_ns}}))
    port = free_port()
    log = tmp_path_factory.mktemp("dra-controller-explain") / "gpu-dra-controller.log"
    args = [
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{port}",
        f"--leader-election-namespace={lease_ns}",
        "--leader-election-id=gpu-dra-controller-explain-test",
        f"--explanation-ttl={TTL_SECONDS}s",
    ]
    with running("pkg.app.gpu_dra_controller", args, log_path=log):
        eventually(lambda: ready(port), timeout=60, what="gpu-dra-controller ready")
        yield port


def explanation_roles(release: str) -> str:
    """The chart's ClaimExplanation ClusterRoles, rendered by helm."""
    args = [str(default_bin_dir() / "helm"), "template", release, str(CHART), "--namespace", "gpu-system"]
    args += ["--set-json", "metricsProxy.enabled=false"]
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    docs = [
        d
        for d in yaml.safe_load_all(result.stdout)
        if d and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == COMPONENT
    ]
    edit = next(d for d in docs if d["metadata"]["name"].endswith("-edit"))
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    return yaml.safe_dump_all(docs)


@pytest.fixture
def editor(
    kube: KubeClient, namespace: str, control_plane: ControlPlane, tmp_path: Path, unique: str
) -> Iterator[User]:
    """A namespace user with view and the chart's aggregated edit rules for ClaimExplanations."""
    user = namespace_user(kube, control_plane, namespace, tmp_path)
    release = f"ce-{unique}"
    manifest = explanation_roles(release)
    control_plane.kubectl("apply", "-f", "-", input_text=manifest)
    control_plane.kubectl(
        "create", "rolebinding", "gpu-user-explain",
        f"--clusterrole={release}-gpu-control-plane-claim-explanation-edit",
        f"--serviceaccount={namespace}:gpu-user", "-n", namespace,
    )  # fmt: skip
    try:
        yield user
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input_text=manifest)


@pytest.mark.usefixtures("explaining_controller")
def test_an_editor_gets_the_controllers_answer_the_same_as_the_local_one(
    kube: KubeClient,
    namespace: str,
    gpu_node: GpuNode,
    editor: User,
    control_plane: ControlPlane,
    unique: str,
) -> None:
    # Two whole cards asked of a node with one: never allocatable, so the controller leaves it be.
    claim = new_claim("two-cards", namespace, gpu_node.cls("physical"))
    assert claim.spec is not None
    claim.spec.devices.requests[0].exactly.count = 2  # type: ignore[union-attr,index]
    kube.create(RESOURCE_CLAIM, claim)

    served = editor.run("explain", "two-cards", "--timeout", "30")
    assert served.code == 5, served.err
    assert served.err == ""  # answered by the controller: no fallback warning
    assert served.out.startswith(f"claim {namespace}/two-cards (strategy best-fit)\n")
    assert "result: NOT allocatable" in served.out
    assert gpu_node.name in served.out  # its card, listed with its verdict
    # The request is gone: the plugin deleted it after printing.
    items, _ = kube.list(CLAIM_EXPLANATION, namespace=namespace)
    assert items == []

    with bind_viewer_role(control_plane, editor, f"ce-viewer-{unique}"):
        local = editor.run("explain", "two-cards", "--local")
    assert local.code == 5, local.err
    assert local.out == served.out


@pytest.mark.usefixtures("explaining_controller")
def test_a_missing_claim_is_answered_with_the_reason_and_old_answers_expire(
    kube: KubeClient, namespace: str
) -> None:
    request = kube.create(
        CLAIM_EXPLANATION,
        ClaimExplanation(
            metadata=V1ObjectMeta(name="q", namespace=namespace),
            spec=ClaimExplanationSpec(claim_name="no-such-claim"),
        ),
    )

    def answered() -> ClaimExplanation | None:
        obj = kube.get(CLAIM_EXPLANATION, "q", namespace)
        return obj if obj.status is not None and obj.status.outcome is not None else None

    status = eventually(answered, timeout=30, what="the ClaimExplanation answered").status
    assert status is not None
    assert status.outcome is ExplanationOutcome.ERROR
    assert status.reason == f"ResourceClaim {namespace}/no-such-claim not found"
    assert status.observed_generation == request.metadata.generation
    fields = {m.manager for m in answered().metadata.managed_fields or []}  # type: ignore[union-attr]
    assert "gpu-dra-controller-explain" in fields

    def gone() -> bool:
        try:
            kube.get(CLAIM_EXPLANATION, "q", namespace)
        except NotFoundError:
            return True
        return False

    eventually(gone, timeout=TTL_SECONDS + 30, what="the answered ClaimExplanation deleted after its TTL")
