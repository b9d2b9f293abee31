"""gpu-controller's compute-domain controller against the real API server.

Channel devices are offered by hand-written ResourceSlices (as gpu-handler publishes them on a
fabric node), and claims are allocated by writing their status as the scheduler would, so each
step of a domain's life is driven exactly: channels unique across domains, the template's shape,
two domains on the same two nodes sharing their clique's one IMEX ensemble (two daemon Pods, not
four), a node withdrawing its channels leaving the ensemble (the other node's daemon recreated
with the new nodes list), and deletion waiting for the claims, the ensemble going with the last
domain. No kubelet runs the daemon Pods; their readiness is not what this test is about.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import V1ConfigMap, V1ObjectMeta, V1Pod
from testutil.compute_domains import CLIQUE_A, channel_pool
from testutil.integration.gpu_controller_helpers import gpu_controller
from testutil.integration.process_helpers import eventually
from testutil.k8s_fields import meta

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_FINALIZER, ComputeDomain
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import (
    CONFIG_MAP,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from pkg.gpucontroller.imexensemble.render import DAEMON_SELECTOR, LABEL_CLIQUE, LABEL_NODES_HASH, clique_hash

pytestmark = pytest.mark.dra_api

SIMULATED_DAEMON = ["python", "-m", "pkg.backends.simulated.imex_daemon", "-c", "/etc/nvidia-imex/config.cfg"]


def operator_config(kube: KubeClient, namespace: str) -> None:
    document = {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GPUOperatorConfig",
        "spec": {
            "computeDomains": {
                "image": "gpu-control-plane:test",
                "command": SIMULATED_DAEMON,
                "readinessCommand": [*SIMULATED_DAEMON, "--query"],
                "privileged": False,
            }
        },
    }
    kube.create(
        CONFIG_MAP,
        V1ConfigMap(
            metadata=V1ObjectMeta(name="gpu-control-plane", namespace=namespace),
            data={"config.yaml": yaml.safe_dump(document)},
        ),
    )


@pytest.fixture
def fabric(kube: KubeClient, unique: str) -> Iterator[tuple[str, str]]:
    """Two nodes of one clique offering channel devices (no Node objects are needed for this)."""
    nodes = (f"cd-x-{unique}", f"cd-y-{unique}")
    for node in nodes:
        kube.create(RESOURCE_SLICE, channel_pool(node, CLIQUE_A))
    try:
        yield nodes
    finally:
        for node in nodes:
            with contextlib.suppress(NotFoundError):
                kube.delete(RESOURCE_SLICE, f"{node}-gpus")


@pytest.fixture
def controller(kubeconfig: str, kube: KubeClient, namespace: str, tmp_path: Path) -> Iterator[None]:
    operator_config(kube, namespace)
    with gpu_controller(kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log"):
        yield


def make_domain(kube: KubeClient, namespace: str, name: str) -> ComputeDomain:
    body = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
    }
    return kube.create(COMPUTE_DOMAIN, ComputeDomain.from_api_dict(body))


def domain_status(kube: KubeClient, namespace: str, name: str) -> Any:
    return kube.get(COMPUTE_DOMAIN, name, namespace).status


def allocate(kube: KubeClient, namespace: str, name: str, domain: ComputeDomain, node: str) -> None:
    """A claim of the domain's template, allocated its channel on ``node`` as the scheduler would."""
    template = kube.get(
        RESOURCE_CLAIM_TEMPLATE, str(domain.spec.channel.resource_claim_template.name), namespace
    )
    spec = RESOURCE_CLAIM_TEMPLATE.encode(template)["spec"]["spec"]
    claim = kube.create(
        RESOURCE_CLAIM,
        RESOURCE_CLAIM.decode({"metadata": {"name": name, "namespace": namespace}, "spec": spec}),
    )
    status = domain_status(kube, namespace, str(domain.metadata.name))
    body = RESOURCE_CLAIM.encode(claim)
    body["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "channel",
                        "driver": "gpu.deckhouse.io",
                        "pool": f"gpus/{node}",
                        "device": f"imex-channel-{status.channel}",
                    }
                ],
                "config": [{"source": "FromClaim", **spec["devices"]["config"][0]}],
            }
        }
    }
    kube.update_status(RESOURCE_CLAIM, RESOURCE_CLAIM.decode(body))


def daemons(kube: KubeClient, namespace: str) -> list[V1Pod]:
    selector = f"{DAEMON_SELECTOR},{LABEL_CLIQUE}={clique_hash(CLIQUE_A)}"
    pods, _ = kube.list(POD, namespace=namespace, label_selector=selector)
    return [p for p in pods if meta(p).deletion_timestamp is None]


def daemon_nodes(kube: KubeClient, namespace: str) -> dict[str, str]:
    """node -> the nodes hash of its live daemon Pod in clique A's ensemble."""
    return {
        str(p.spec.node_name if p.spec else ""): (meta(p).labels or {})[LABEL_NODES_HASH]
        for p in daemons(kube, namespace)
    }


def nodes_config(kube: KubeClient, namespace: str) -> list[str] | None:
    selector = f"{DAEMON_SELECTOR},{LABEL_CLIQUE}={clique_hash(CLIQUE_A)}"
    maps, _ = kube.list(CONFIG_MAP, namespace=namespace, label_selector=selector)
    return maps[0].data["nodes_config.cfg"].split() if maps and maps[0].data else None


def members(kube: KubeClient, namespace: str, name: str) -> list[tuple[str, int]]:
    status = domain_status(kube, namespace, name)
    return [(n.name, n.index) for n in (status.nodes or [])] if status else []


@pytest.mark.usefixtures("controller")
def test_a_domain_lives_through_joins_leaves_and_deletion(
    kube: KubeClient, namespace: str, fabric: tuple[str, str]
) -> None:
    node_x, node_y = fabric
    first = make_domain(kube, namespace, "job-a")
    make_domain(kube, namespace, "job-b")
    channels = eventually(
        lambda: (
            (a.channel, b.channel)
            if (a := domain_status(kube, namespace, "job-a"))
            and (b := domain_status(kube, namespace, "job-b"))
            and a.channel
            and b.channel
            else None
        ),
        what="both domains' channels",
    )
    # The two lowest channels no other domain of the cluster holds (other tests' may still exist).
    others, _ = kube.list(COMPUTE_DOMAIN)
    held = {d.status.channel for d in others if d.metadata.namespace != namespace and d.status}
    free = [c for c in range(1, 10) if c not in held]
    assert sorted(channels) == free[:2]
    assert domain_status(kube, namespace, "job-a").nvlink_domain == CLIQUE_A
    assert COMPUTE_DOMAIN_FINALIZER in (meta(kube.get(COMPUTE_DOMAIN, "job-a", namespace)).finalizers or [])

    template = eventually(
        lambda: _get(kube, RESOURCE_CLAIM_TEMPLATE, "job-a-channel", namespace), what="the claim template"
    )
    devices = RESOURCE_CLAIM_TEMPLATE.encode(template)["spec"]["spec"]["devices"]
    expression = devices["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert f"imexChannel == {channels[0]}" in expression
    assert CLIQUE_A in expression
    assert devices["config"][0]["opaque"]["parameters"]["domainUID"] == first.metadata.uid
    assert meta(template).owner_references[0].uid == first.metadata.uid  # type: ignore[index]

    second = kube.get(COMPUTE_DOMAIN, "job-b", namespace)
    # The clique's ensemble: both nodes offer its channels, so two daemons serve both domains.
    both = eventually(
        lambda: found if len(found := daemon_nodes(kube, namespace)) == 2 else None, what="two daemons"
    )
    eventually(lambda: nodes_config(kube, namespace) == ["imex-0", "imex-1"], what="the ensemble's files")
    allocate(kube, namespace, "claim-ax", first, node_x)
    allocate(kube, namespace, "claim-ay", first, node_y)
    allocate(kube, namespace, "claim-bx", second, node_x)
    allocate(kube, namespace, "claim-by", second, node_y)
    for name in ("job-a", "job-b"):
        eventually(
            lambda name=name: members(kube, namespace, name) == [(node_x, 0), (node_y, 1)],  # type: ignore[misc]
            what=f"{name}'s nodes with their ensemble indexes",
        )
    assert daemon_nodes(kube, namespace) == both  # job churn restarts no daemon
    assert len(daemons(kube, namespace)) == 2  # two Pods for two domains on two nodes, not four

    # Node x withdraws its channels: it leaves the ensemble, node y's daemon restarts without it.
    kube.delete(RESOURCE_SLICE, f"{node_x}-gpus")
    shrunk = eventually(
        lambda: (
            found
            if list(found := daemon_nodes(kube, namespace)) == [node_y] and found[node_y] != both[node_y]
            else None
        ),
        what="only node y's daemon, recreated for the new nodes list",
    )
    eventually(lambda: nodes_config(kube, namespace) == ["imex-1"], what="the files without imex-0")
    eventually(
        lambda: any(
            c.reason == "NodesNotInImexEnsemble"
            for c in domain_status(kube, namespace, "job-a").conditions or []
        ),
        what="job-a naming its node outside the ensemble",
    )

    for claim in ("claim-ax", "claim-bx"):
        kube.delete(RESOURCE_CLAIM, claim, namespace)
    kube.delete(COMPUTE_DOMAIN, "job-a", namespace)
    eventually(
        lambda: any(
            c.reason == "WaitingForClaims" for c in domain_status(kube, namespace, "job-a").conditions or []
        ),
        what="the deleted domain waiting for its claim",
    )
    kube.delete(RESOURCE_CLAIM, "claim-ay", namespace)
    eventually(lambda: _get(kube, COMPUTE_DOMAIN, "job-a", namespace) is None, what="job-a gone")
    assert daemon_nodes(kube, namespace) == shrunk  # job-b still uses the clique
    assert domain_status(kube, namespace, "job-b").channel == channels[1]  # the other domain is untouched

    kube.delete(RESOURCE_CLAIM, "claim-by", namespace)
    kube.delete(COMPUTE_DOMAIN, "job-b", namespace)
    eventually(lambda: daemon_nodes(kube, namespace) == {}, what="the ensemble gone with the last domain")
    eventually(lambda: nodes_config(kube, namespace) is None, what="the ensemble's ConfigMap gone")


def reasons(kube: KubeClient, namespace: str, name: str) -> list[str]:
    return [str(c.reason) for c in domain_status(kube, namespace, name).conditions or []]


def _get(kube: KubeClient, kind: Any, name: str, namespace: str) -> Any:
    try:
        return kube.get(kind, name, namespace)
    except NotFoundError:
        return None
