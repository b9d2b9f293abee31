"""Compute domains on real nodes: each job's own IMEX channel, one IMEX daemon per node of the
clique, nothing left when the jobs go.

Two real nodes (``h100-sxm`` hosts: two H100 SXM and an NVSwitch each) whose cards the simulated
NVML puts in one multi-node NVLink fabric (one cluster UUID, clique 1), gpu-handler on each (host
processes, as in the rest of the tier), and gpu-controller running only its compute-domain
controllers, with the stand-in IMEX daemon (:mod:`pkg.backends.simulated.imex_daemon`) from the
project's image as the daemon. The real scheduler allocates the claims, the real kubelet calls
Prepare, containerd gives the containers the channel device nodes through our CDI specs, and the
daemon Pods run on the nodes' Pod networks and reach each other:

* two domains whose Pods run on the same two nodes each hold a channel of their own, the same on
  both nodes, and a container sees its domain's channel and no other; the two domains share one
  ensemble of two daemons, ready once each reaches the other;
* a Pod of no domain sees no channel;
* a Pod of a domain leaving a node takes the node out of that domain's ``status.nodes``; a node
  whose fabric stops being ready withdraws its channels, leaves the clique's ensemble, and the
  other node's daemon is restarted with the new peer list; with the fabric back it joins again;
* deleting the jobs and their domains removes the templates, the daemons and their ConfigMap, and
  the channel device nodes on both hosts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import (
    CoreV1ResourceClaim,
    V1Namespace,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1ResourceRequirements,
)
from testutil.e2e.gpu_nodes import checkpoint, pod_gone, retire
from testutil.e2e.pods import shell_pod
from testutil.k8s_fields import name_of, spec_of

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY, ComputeDomain, ComputeDomainStatus, DomainState
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.gpustack import GpuStack, config_map
from pkg.devcluster.images import ImageArchive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import wait_until
from pkg.devcluster.projectimage import PROJECT_REPOSITORY
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import CONFIG_MAP, NAMESPACE, POD, RESOURCE_SLICE

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "test" / "fixtures" / "sysfs" / "h100-sxm"
PCI_IDS = ROOT / "test" / "fixtures" / "pci.ids"
CLUSTER = "5f2e0c1a-8d3b-4c7e-9a61-2b4d6e8f0a13"
CLIQUE = f"{CLUSTER}.1"
NODES = ("e2e-nvl-a", "e2e-nvl-b")
CHANNELS_DIR = "nvidia-caps-imex-channels"
DAEMON_LABEL = "app.kubernetes.io/component"
DAEMON_COMPONENT = "imex-daemon"
STANDIN = (
    "python",
    "-m",
    "pkg.backends.simulated.imex_daemon",
    "-c",
    "/etc/nvidia-imex/config.cfg",
    "--state",
    "/tmp/imex-state",
)
# What a domain's Pod prints: the channel device nodes its container has, then it keeps running.
SHOW_CHANNELS = (
    f"ls /dev/{CHANNELS_DIR} 2>/dev/null | sed 's/^/channel=/'; "
    f"test -d /dev/{CHANNELS_DIR} || echo channel=none; echo shown; exec sleep 3600"
)


def imex_operator_config(image: str) -> dict[str, Any]:
    """gpu-controller's configuration: the compute-domain daemons only, the stand-in from ``image``."""
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GPUOperatorConfig",
        "spec": {
            "computeDomains": {
                "image": image,
                "imagePullPolicy": "Never",
                "command": list(STANDIN),
                "readinessCommand": [*STANDIN, "--query"],
                "privileged": False,
            }
        },
    }


@pytest.fixture(scope="module")
def nvl_nodes(
    node_pool: Any, control_plane: ControlPlane, project_image: ImageArchive
) -> Iterator[dict[str, GpuComponents]]:
    """Two real nodes whose H100s are in one NVLink clique, with our node components running."""
    nodes: list[RealNode] = [node_pool.get(NodeConfig(name=name, gpu_fixture=FIXTURE)) for name in NODES]
    running: dict[str, GpuComponents] = {}
    try:
        for node in nodes:
            node.host.put_in_fabric(cluster_uuid=CLUSTER, clique_id=1)
            node.containerd.import_images(project_image.path)
            components = GpuComponents(
                node=node, plane=control_plane, pci_ids=PCI_IDS, driver_version=DRIVER_VERSION
            )
            components.start()
            running[node.name] = components
        for node in nodes:
            wait_for_offers(control_plane, node.name, cards=2)
            running[node.name].wait_registered()
        yield running
    finally:
        for components in running.values():
            components.stop()
            retire(control_plane, components.node.name)


@pytest.fixture(scope="module")
def imex_stack(
    kube: KubeClient, control_plane: ControlPlane, nvl_nodes: dict[str, GpuComponents], work_dir: Path
) -> Iterator[GpuStack]:
    """gpu-controller with only its compute-domain controllers, in a namespace of its own."""
    namespace = "imex-system"
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=namespace)))
    stack = GpuStack(
        plane=control_plane,
        work=work_dir,
        namespace=namespace,
        config="gpuctl-imex",
        config_key=OPERATOR_CONFIG_KEY,
        pci_ids=PCI_IDS,
        driver_version=DRIVER_VERSION,
    )
    document = imex_operator_config(f"{PROJECT_REPOSITORY}:v1")
    kube.create(CONFIG_MAP, config_map(stack.config, OPERATOR_CONFIG_KEY, document), namespace=namespace)
    stack.start_controller(controllers="computedomain")
    try:
        yield stack
    finally:
        stack.stop()
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def jobs(kube: KubeClient, control_plane: ControlPlane) -> Iterator[str]:
    """The namespace of this module's jobs: its tests follow the same domains and Pods in turn."""
    name = f"cd-{uuid.uuid4().hex[:8]}"
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=name)))
    # Pods are admitted only once the namespace's default service account exists.
    wait_until(
        lambda: bool(control_plane.kubectl("get", "serviceaccount", "default", "-n", name, check=False)),
        timeout=30,
        what=f"service account default in {name}",
    )
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


class Jobs:
    """What the tests of this module share, in order: the domains and their Pods."""

    channels: dict[str, int] = {}
    pods: dict[str, list[str]] = {}


def _domain(name: str) -> ComputeDomain:
    return ComputeDomain.model_validate(
        {
            "metadata": {"name": name},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
        }
    )


def _domain_pod(name: str, template: str, *, node: str) -> V1Pod:
    pod = shell_pod(
        name,
        SHOW_CHANNELS,
        node=node,
        resource_claims=[V1PodResourceClaim(name="nvl", resource_claim_template_name=template)],
    )
    spec_of(pod).containers[0].resources = V1ResourceRequirements(claims=[CoreV1ResourceClaim(name="nvl")])
    return pod


def _shown(plane: ControlPlane, namespace: str, pod: str, *, timeout: float = 180.0) -> list[str]:
    """The channels the Pod's container has (``none``: no channel folder), once it printed them."""
    try:
        wait_until(
            lambda: "shown" in plane.kubectl("logs", "-n", namespace, pod, check=False),
            timeout=timeout,
            what=f"Pod {namespace}/{pod} to run and show its channels",
        )
    except TimeoutError as exc:
        described = plane.kubectl("describe", "pod", "-n", namespace, pod, check=False)
        daemons = plane.kubectl("get", "pods", "-A", "-o", "wide", check=False)
        raise AssertionError(f"{exc}\n{described}\n{daemons}") from None
    lines = plane.kubectl("logs", "-n", namespace, pod).splitlines()
    return sorted(line.removeprefix("channel=") for line in lines if line.startswith("channel="))


def _status(kube: KubeClient, namespace: str, name: str) -> ComputeDomainStatus:
    return kube.get(COMPUTE_DOMAIN, name, namespace).status or ComputeDomainStatus()


def _with_channel(kube: KubeClient, namespace: str, name: str) -> ComputeDomainStatus | None:
    """The domain's status once it names a channel (a wait's condition)."""
    status = _status(kube, namespace, name)
    return status if status.channel is not None else None


def _domain_ready(kube: KubeClient, namespace: str, name: str) -> ComputeDomainStatus | None:
    """The domain's status once it is Ready (a wait's condition)."""
    status = _status(kube, namespace, name)
    return status if status.state is DomainState.READY else None


def _nodes(status: ComputeDomainStatus) -> list[str]:
    return [n.name for n in status.nodes or []]


def _daemons(kube: KubeClient, namespace: str) -> list[V1Pod]:
    pods, _ = kube.list(POD, namespace=namespace, label_selector=f"{DAEMON_LABEL}={DAEMON_COMPONENT}")
    return [p for p in pods if p.metadata is not None and p.metadata.deletion_timestamp is None]


def _ready(pod: V1Pod) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _ensemble(kube: KubeClient, namespace: str) -> dict[str, str]:
    """Node -> name of its Ready daemon Pod (empty while any daemon is not Ready)."""
    pods = _daemons(kube, namespace)
    if not pods or not all(_ready(p) for p in pods):
        return {}
    return {str(spec_of(p).node_name): name_of(p) for p in pods}


def _peers(kube: KubeClient, namespace: str) -> list[str]:
    """The peer names of the clique's daemon configuration (its nodes_config.cfg)."""
    maps, _ = kube.list(CONFIG_MAP, namespace=namespace, label_selector=f"{DAEMON_LABEL}={DAEMON_COMPONENT}")
    return sorted(
        line.strip()
        for m in maps
        for line in ((m.data or {}).get("nodes_config.cfg") or "").splitlines()
        if line.strip() and not line.startswith("#")
    )


def _no_channel_nodes(node: RealNode) -> bool:
    return _channel_nodes(node) == []


def _channel_nodes(node: RealNode) -> list[str]:
    folder = node.host.dev / CHANNELS_DIR
    return sorted(p.name for p in folder.iterdir() if p.is_char_device()) if folder.is_dir() else []


def _offers_channels(kube: KubeClient, node: str) -> bool:
    slices, _ = kube.list(RESOURCE_SLICE)
    for found in slices:
        spec = found.spec
        if spec is None or spec.node_name != node:
            continue
        if any(d.name.startswith("imex-channel-") for d in spec.devices or []):
            return True
    return False


def test_two_domains_on_the_same_nodes_hold_channels_of_their_own(
    kube: KubeClient,
    control_plane: ControlPlane,
    jobs: str,
    nvl_nodes: dict[str, GpuComponents],
    imex_stack: GpuStack,
) -> None:
    for name in ("train-a", "train-b"):
        kube.create(COMPUTE_DOMAIN, _domain(name), namespace=jobs)
        status = imex_stack.wait(
            partial(_with_channel, kube, jobs, name),
            what=f"domain {name} to get a channel",
        )
        assert status.nvlink_domain == CLIQUE, status
        assert status.channel is not None
        Jobs.channels[name] = status.channel
        Jobs.pods[name] = []
        for node in NODES:
            pod = _domain_pod(f"{name}-{node[-1]}", f"{name}-channel", node=node)
            kube.create(POD, pod, namespace=jobs)
            Jobs.pods[name].append(name_of(pod))
    assert Jobs.channels["train-a"] != Jobs.channels["train-b"], Jobs.channels

    for name, names in Jobs.pods.items():
        for shown in names:
            assert _shown(control_plane, jobs, shown) == [f"channel{Jobs.channels[name]}"], shown
    for name in Jobs.pods:
        status = imex_stack.wait(
            partial(_domain_ready, kube, jobs, name),
            what=f"domain {name} to be Ready",
        )
        assert sorted(_nodes(status)) == list(NODES), status
        assert all(n.ready for n in status.nodes or []), status

    # One daemon per node for both domains: the clique's ensemble.
    ensemble = imex_stack.wait(lambda: _ensemble(kube, imex_stack.namespace), what="the ensemble ready")
    assert sorted(ensemble) == list(NODES), ensemble
    assert len(_peers(kube, imex_stack.namespace)) == 2
    for components in nvl_nodes.values():
        wanted = sorted(f"channel{c}" for c in Jobs.channels.values())
        assert _channel_nodes(components.node) == wanted


def test_a_pod_of_no_domain_sees_no_channel(
    kube: KubeClient, control_plane: ControlPlane, jobs: str, nvl_nodes: dict[str, GpuComponents]
) -> None:
    pod = shell_pod("no-domain", SHOW_CHANNELS, node=NODES[0])
    kube.create(POD, pod, namespace=jobs)
    try:
        assert _shown(control_plane, jobs, "no-domain") == ["none"]
    finally:
        kube.delete(POD, "no-domain", jobs)


def test_a_node_leaving_reconfigures_the_others(
    kube: KubeClient,
    control_plane: ControlPlane,
    jobs: str,
    nvl_nodes: dict[str, GpuComponents],
    imex_stack: GpuStack,
) -> None:
    system = imex_stack.namespace
    leaver, stayer = NODES[1], NODES[0]
    # A Pod leaving: train-a has no Pod on the leaver any more, so the leaver leaves train-a.
    gone = Jobs.pods["train-a"].pop()
    kube.delete(POD, gone, jobs)
    wait_until(lambda: pod_gone(kube, jobs, gone), timeout=90, what=f"Pod {gone} to go")
    imex_stack.wait(
        lambda: _nodes(_status(kube, jobs, "train-a")) == [stayer],
        what=f"{leaver} to leave train-a's nodes",
    )

    # A node leaving the clique: its fabric is no longer ready, it withdraws its channels, and the
    # stayer's daemon is recreated with itself as the only peer.
    before = _ensemble(kube, system)
    nvl_nodes[leaver].node.host.put_in_fabric(cluster_uuid=CLUSTER, clique_id=1, state="InProgress")
    imex_stack.wait(lambda: not _offers_channels(kube, leaver), what=f"{leaver} to withdraw its channels")
    after = imex_stack.wait(
        lambda: (e := _ensemble(kube, system)) and sorted(e) == [stayer] and e,
        what=f"the ensemble to shrink to {stayer}",
    )
    assert after[stayer] != before[stayer], "the stayer's daemon was not restarted with the new peers"
    assert len(_peers(kube, system)) == 1
    # train-b still has a running Pod on the leaver, whose node has no daemon now.
    status = _status(kube, jobs, "train-b")
    assert status.state is DomainState.NOT_READY, status
    assert any(n.name == leaver and not n.ready for n in status.nodes or []), status

    # The fabric back: the node offers channels again and rejoins; both daemons restart.
    nvl_nodes[leaver].node.host.put_in_fabric(cluster_uuid=CLUSTER, clique_id=1)
    rejoined = imex_stack.wait(
        lambda: (e := _ensemble(kube, system)) and sorted(e) == list(NODES) and e,
        what="the ensemble to grow back to both nodes",
    )
    assert rejoined[stayer] != after[stayer]
    imex_stack.wait(
        lambda: _status(kube, jobs, "train-b").state is DomainState.READY, what="train-b Ready again"
    )


def test_deleting_the_jobs_cleans_everything(
    kube: KubeClient,
    control_plane: ControlPlane,
    jobs: str,
    nvl_nodes: dict[str, GpuComponents],
    imex_stack: GpuStack,
) -> None:
    for name, pods in Jobs.pods.items():
        for pod in pods:
            kube.delete(POD, pod, jobs)
        kube.delete(COMPUTE_DOMAIN, name, jobs)
    for pods in Jobs.pods.values():
        for pod in pods:
            wait_until(partial(pod_gone, kube, jobs, pod), timeout=90, what=f"Pod {pod} to go")
    for name in Jobs.pods:
        imex_stack.wait(partial(_domain_gone, kube, jobs, name), what=f"domain {name} to go")
    imex_stack.wait(lambda: not _daemons(kube, imex_stack.namespace), what="the daemons to go")
    assert _peers(kube, imex_stack.namespace) == []
    for components in nvl_nodes.values():
        wait_until(
            partial(_no_channel_nodes, components.node),
            timeout=60,
            what=f"the channel device nodes of {components.node.name} to go",
        )
        assert checkpoint(components.node) == {}
    templates = control_plane.kubectl("get", "resourceclaimtemplates", "-n", jobs, "-o", "name")
    assert templates.strip() == "", templates


def _domain_gone(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        kube.get(COMPUTE_DOMAIN, name, namespace)
    except NotFoundError:
        return True
    return False
