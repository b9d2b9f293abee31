"""``kubectl gpu`` run as its real executable by a user with only namespace rights.

The user (test/kubectl_gpu_user.py) is a ServiceAccount of the test's namespace bound there to
Kubernetes' ``view`` rules, with a kubeconfig of its own, as a namespace user on a laptop has. The
admin writes what gpu-handler and the scheduler would — a ResourceSlice, claims with allocations,
``reservedFor`` Pods and ``DeviceUsage`` entries in ``status.devices[]`` — directly through the API.
The plugin must then print the right rows, refuse cluster-wide reads with a sentence and exit code
4, and explain a claim once the chart's ``gpuViewer`` role is bound to the user's group.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.integration.dra_objects import device_class
from testutil.kubectl_gpu_user import User, bind_viewer_role, namespace_user, table

from pkg.devcluster.cluster import ControlPlane
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, POD, RESOURCE_CLAIM, RESOURCE_SLICE

pytestmark = pytest.mark.dra_api

DRIVER = "gpu.deckhouse.io"
EXECUTABLE = Path(sys.executable).parent / "kubectl-gpu"
GiB = 1024**3


@pytest.fixture
def user(kube: KubeClient, namespace: str, control_plane: ControlPlane, tmp_path: Path) -> User:
    return namespace_user(kube, control_plane, namespace, tmp_path)


@dataclass(frozen=True)
class Cluster:
    node: str
    pods: dict[str, str]  # claim -> Pod holding it


def _usage(containers: list[dict[str, Any]], physical_gpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "DeviceUsage",
        "sampledAt": "2026-11-26T12:00:00Z",
        "physicalGPU": physical_gpu,
        "uuid": f"GPU-{physical_gpu}",
        "memoryUsedBytes": sum(c["memoryBytes"] for c in containers),
        "containers": containers,
    }


@pytest.fixture
def gpus(kube: KubeClient, namespace: str, unique: str) -> Iterator[Cluster]:
    """A node's pool of four cards, a DeviceClass for them, and claims of ``namespace``: ``train``
    (card-a, sampled), ``infer`` (card-b, no sample yet), ``broken`` (card-c, malformed sample),
    ``pending`` (not allocated: card-d is what it would get)."""
    node = f"kgpu-{unique}"
    pool = f"gpus/{node}"
    cards = ["card-a", "card-b", "card-c", "card-d"]
    kube.create(
        RESOURCE_SLICE,
        RESOURCE_SLICE.decode(
            {
                "metadata": {"name": f"{node}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": card,
                            "attributes": {
                                f"{DRIVER}/deviceType": {"string": "Physical"},
                                f"{DRIVER}/sharingStrategy": {"string": "Exclusive"},
                                f"{DRIVER}/uuid": {"string": f"GPU-{card}"},
                                f"{DRIVER}/testRun": {"string": unique},
                            },
                        }
                        for card in cards
                    ],
                },
            }
        ),
    )
    cls = f"kgpu-{unique}"
    cel = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].testRun == "{unique}"'
    kube.create(DEVICE_CLASS, device_class(cls, cel=cel))
    usage = {
        "train": _usage(
            [
                {"namespace": namespace, "pod": "train-pod", "container": "trainer", "processes": 2,
                 "memoryBytes": 30 * GiB, "smUtilizationPercent": 91},
                {"namespace": namespace, "pod": "train-pod", "container": "logger", "processes": 1,
                 "memoryBytes": GiB // 2},
            ],
            f"{node}-0-10de-2330",
        ),
        "broken": {"kind": "DeviceUsage", "memoryUsedBytes": "a lot"},
    }  # fmt: skip
    pods = {}
    for claim, card in (("train", "card-a"), ("infer", "card-b"), ("broken", "card-c"), ("pending", None)):
        spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}
        created = kube.create(
            RESOURCE_CLAIM,
            RESOURCE_CLAIM.decode({"metadata": {"name": claim, "namespace": namespace}, "spec": spec}),
        )
        if card is None:
            continue
        pod = kube.create(
            POD,
            POD.decode(
                {
                    "metadata": {"name": f"{claim}-pod", "namespace": namespace},
                    "spec": {
                        "nodeName": node,  # no kubelet: the Pod only exists, as a claim's consumer
                        "containers": [
                            {"name": "main", "image": "none", "resources": {"claims": [{"name": "gpu"}]}}
                        ],
                        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                    },
                }
            ),
        )
        assert pod.metadata is not None
        pods[claim] = str(pod.metadata.name)
        status: dict[str, Any] = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": pool, "device": card}]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}],
        }
        if claim in usage:
            status["devices"] = [{"driver": DRIVER, "pool": pool, "device": card, "data": usage[claim]}]
        raw = RESOURCE_CLAIM.encode(created)
        kube.update_status(RESOURCE_CLAIM, RESOURCE_CLAIM.decode({**raw, "status": status}))
    yield Cluster(node, pods)
    for kind, name in ((RESOURCE_SLICE, f"{node}-gpus"), (DEVICE_CLASS, cls)):
        with contextlib.suppress(NotFoundError):
            kube.delete(kind, name)


@pytest.fixture
def viewer_role(control_plane: ControlPlane, user: User, unique: str) -> Iterator[None]:
    """The chart's gpuViewer ClusterRole, bound to the user's group only."""
    with bind_viewer_role(control_plane, user, f"kgpu-{unique}"):
        yield


def test_namespace_user_lacks_the_cluster_scoped_reads_by_default(
    control_plane: ControlPlane, user: User
) -> None:
    """The fact the chart's gpuViewer role exists for, asked of the real API server."""

    def can_i(verb: str, resource: str, *extra: str) -> bool:
        out = control_plane.kubectl(
            "auth", "can-i", verb, resource, *extra, f"--as=system:serviceaccount:{user.namespace}:gpu-user",
            "--as-group=system:serviceaccounts", f"--as-group={user.group}", check=False,
        )  # fmt: skip
        return out.strip().startswith("yes")

    assert can_i("list", "resourceclaims.resource.k8s.io", "-n", user.namespace)
    assert not can_i("list", "resourceclaims.resource.k8s.io", "--all-namespaces")
    assert not can_i("list", "resourceslices.resource.k8s.io")
    assert not can_i("list", "deviceclasses.resource.k8s.io")
    assert not can_i("list", "physicalgpus.gpu.deckhouse.io")


def test_top_prints_each_container_and_every_claims_state(user: User, gpus: Cluster) -> None:
    result = user.run("top")
    assert result.code == 0, result.err
    header, *lines = result.out.splitlines()
    assert header.split() == [
        "NAMESPACE", "POD", "CONTAINER", "CLAIM", "DEVICE", "GPU-MEMORY", "SM%", "AGE-OF-SAMPLE",
    ]  # fmt: skip
    # Largest memory first; the claims without a usable sample after them, by name.
    assert [line.split()[:7] for line in lines[:2]] == [
        [user.namespace, "train-pod", "trainer", "train", "card-a", "30Gi", "91"],
        [user.namespace, "train-pod", "logger", "train", "card-a", "512Mi", "-"],
    ]
    assert lines[2].split()[:5] == [user.namespace, "broken-pod", "broken", "card-c", "<malformed>"]
    assert lines[3].split()[:6] == [user.namespace, "infer-pod", "infer", "card-b", "<no", "sample>"]
    assert len(lines) == 4
    assert f"warning: claim {user.namespace}/broken device card-c: malformed DeviceUsage" in result.err
    items = json.loads(user.run("top", "-o", "json", "--sort-by", "claim").out)["items"]
    assert [(i["claim"], i.get("memoryBytes")) for i in items] == [
        ("broken", None),
        ("infer", None),
        ("train", 30 * GiB),
        ("train", GiB // 2),
    ]


def test_who_prints_the_namespaces_claims_and_says_what_it_cannot_read(user: User, gpus: Cluster) -> None:
    result = user.run("who")
    assert result.code == 0, result.err
    rows = table(result.out)
    assert [(r["CLAIM"], r["PODS"], r["NODE"], r["DEVICE"]) for r in rows] == [
        ("train", "train-pod", gpus.node, "card-a"),
        ("infer", "infer-pod", gpus.node, "card-b"),
        ("broken", "broken-pod", gpus.node, "card-c"),
    ]
    assert {r["TYPE"] for r in rows} == {"<unknown>"}
    assert (
        "warning: forbidden: you cannot list resourceslices.resource.k8s.io at the cluster scope"
        in result.err
    )


def test_a_cluster_wide_request_is_refused_with_a_sentence_and_exit_code_4(user: User, gpus: Cluster) -> None:
    for args in (("who", "-A"), ("top", "--all-namespaces")):
        result = user.run(*args)
        assert result.code == 4
        assert result.out == ""
        assert result.err.startswith(
            "error: forbidden: you cannot list resourceclaims.resource.k8s.io at the cluster scope"
        ), result.err
    refused = user.run("explain", "pending")
    assert refused.code == 4
    # view may not ask gpu-dra-controller (edit may), so the plugin says so and reads the cluster itself.
    warning, error = refused.err.splitlines()
    assert warning.startswith("warning: forbidden: you cannot create claimexplanations.gpu.deckhouse.io")
    assert error.startswith("error: forbidden: you cannot list resourceslices.resource.k8s.io"), refused.err
    assert "gpuViewer" in refused.err
    missing = user.run("explain", "no-such-claim")
    assert missing.code == 3
    # No claim of that name, and no Pod either (a bare name that is a Pod's explains that Pod).
    assert (
        missing.err
        == f'error: ResourceClaim or Pod "no-such-claim" not found in namespace "{user.namespace}"\n'
    )


@pytest.mark.usefixtures("viewer_role")
def test_with_the_viewer_role_who_has_device_types_and_explain_answers(user: User, gpus: Cluster) -> None:
    who = user.run("who", "-o", "json")
    assert who.code == 0, who.err
    assert "warning: forbidden: you cannot list resourceslices" not in who.err
    assert "physicalgpus" not in who.err  # the role grants them too
    items = json.loads(who.out)["items"]
    assert [(i["claim"], i["type"], i["uuid"]) for i in items] == [
        ("train", "Physical", "GPU-card-a"),
        ("infer", "Physical", "GPU-card-b"),
        ("broken", "Physical", "GPU-card-c"),
    ]

    on_node = json.loads(user.run("who", "--node", gpus.node, "-o", "json").out)["items"]
    assert [(i.get("claim"), i["device"]) for i in on_node] == [
        ("train", "card-a"),
        ("infer", "card-b"),
        ("broken", "card-c"),
        (None, "card-d"),  # nobody holds it
    ]
    assert on_node[-1]["free"] is True

    explained = user.run("explain", "pending", "-n", user.namespace)
    assert explained.code == 0, explained.err
    assert f"gpu -> {DRIVER}/gpus/{gpus.node}/card-d" in explained.out
    # Other namespaces' claims are not readable: the answer says what it could not count.
    assert "forbidden: you cannot list resourceclaims.resource.k8s.io at the cluster scope" in explained.err


def test_kubectl_finds_the_plugin_and_python_m_runs_it(
    user: User, gpus: Cluster, control_plane: ControlPlane
) -> None:
    kubectl = str(control_plane.config.bin_dir / "kubectl")
    env_path = f"{EXECUTABLE.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = subprocess.run(
        [kubectl, "gpu", "who"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": env_path, "KUBECONFIG": str(user.kubeconfig)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert [r["CLAIM"] for r in table(result.stdout)] == ["train", "infer", "broken"]
    as_module = user.run("top", "-o", "yaml", command=(sys.executable, "-m", "pkg.app.kubectlgpu"))
    assert as_module.code == 0, as_module.err
    assert yaml.safe_load(as_module.out)["kind"] == "GPUUsageList"


@pytest.mark.usefixtures("viewer_role")
def test_explain_takes_a_pending_pod_and_explains_the_claim_the_scheduler_would_make(
    kube: KubeClient, user: User, gpus: Cluster, namespace: str, unique: str
) -> None:
    """A Pod asking an extended resource has no claim until it is scheduled: the plugin explains
    the claim the scheduler would make for it (three cards, one free) and creates nothing."""
    resource = f"gpu.deckhouse.io/kgpu-{unique}"
    cls = f"kgpu-ext-{unique}"
    cel = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].testRun == "{unique}"'
    kube.create(DEVICE_CLASS, device_class(cls, cel=cel, extended_resource_name=resource))
    try:
        kube.create(
            POD,
            POD.decode(
                {
                    "metadata": {"name": "wants-three", "namespace": namespace},
                    "spec": {
                        "containers": [
                            {
                                "name": "train",
                                "image": "none",
                                "resources": {"requests": {resource: "3"}, "limits": {resource: "3"}},
                            }
                        ]
                    },
                }
            ),
        )
        claims_before = len(kube.list(RESOURCE_CLAIM, namespace=namespace)[0])
        explained = user.run("explain", "pod/wants-three", "-n", namespace)
        assert explained.code == 5, explained.err
        assert explained.out.startswith(f"pod {namespace}/wants-three is pending")
        assert (
            f"== extended resource {resource}: 3 of container train (the claim the scheduler would make)"
            in explained.out
        )
        as_json = json.loads(user.run("explain", "wants-three", "-n", namespace, "-o", "json").out)
        [item] = as_json["items"]
        assert (item["source"], item["created"], item["allocatable"]) == ("extendedResource", False, False)
        assert len(kube.list(RESOURCE_CLAIM, namespace=namespace)[0]) == claims_before  # nothing created
    finally:
        with contextlib.suppress(NotFoundError):
            kube.delete(DEVICE_CLASS, cls)
