"""gpu-controller with real nodes: the validator flow and the node components' DaemonSets.

On a real node of its own (``a30-x2``; the session's ``gpu_node`` marks DriverReady by hand, this
module must not share it), gpu-controller renders the five node components' DaemonSets from a
configuration ConfigMap (stand-in images, see ``pkg.devcluster.gpustack``), and the real DaemonSet controller,
scheduler, kubelet and containerd run them:

* a card becomes DriverReady only after the stand-in validator Pod is Ready (its init container
  found the simulated NVIDIA device nodes, its readiness probe keeps finding them), and only then
  are its offers published;
* deleting the validator Pod takes the offers away: with a device node gone, the replacement Pod's
  validation fails, DriverReady is False with the Pod's own reason and the validator's message, the
  gate label goes and gpu-handler's Pod leaves the node; with the device node back, a new Pod brings
  all of it back; meanwhile a Prometheus server that scrapes gpu-controller through
  kube-rbac-proxy with a metrics reader's token and evaluates the chart's alerts (the test's
  values: GPUNotDriverReady after 2 s, every group each second) fires GPUNotDriverReady for both
  cards, and resolves it once they are DriverReady again;
* a card made unhealthy (the simulated backend's health file) is HardwareHealthy=False from
  gpu-handler, gpu-controller exports it, and the same kind of Prometheus server fires
  GPUHardwareUnhealthy (2 s in the test's values) for that card alone, and resolves it once the
  health file is gone and the card is healthy again (``--health-quiet-period=5`` on the e2e nodes);
  both latencies are printed;
* the DaemonSets land only where their gate labels say, and a node joining the cluster starts the
  node agent there and restarts no existing Pod (docs/architecture.md#gate-labels-not-hostname-lists); a node
  that becomes a control-plane node loses its node agent.

gpu-node-agent and gpu-handler do their work as host processes (``pkg.devcluster.gpustack``); their
DaemonSets' Pods are stand-ins whose placement is what is checked.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Namespace, V1ObjectMeta, V1Pod
from testutil.cluster_views import cards, driver_ready, gates, offers
from testutil.e2e.prometheus_server import (
    Prometheus,
    chart_alert_rules,
    delete_reader,
    metrics_proxy,
    prometheus,
    reader_token,
)
from testutil.k8s_fields import labels_of, meta, name_of, status_of, uid_of

from api.gpu.v1alpha1 import OPERATOR_CONFIG_KEY, PhysicalGPUConditionType
from pkg.backends.simulated.backend import HEALTH_FILE_SUFFIX
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import mark_driver_ready
from pkg.devcluster.gpustack import GpuStack
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import wait_until
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import CONFIG_MAP, DAEMON_SET, NAMESPACE, NODE, POD
from pkg.gpucontroller.names import LABEL_COMPONENT, LABEL_DRIVER_READY, LABEL_NVIDIA_PRESENT

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
CONFIG = "gpuctl"
DRIVER = "gpu.deckhouse.io"
OFFERS_PER_A30 = 16
EVERYWHERE = ("gpu-node-agent",)
DRIVER_READY_ONLY = ("gpu-handler", "nv-hostengine", "dcgm-exporter")
HARDWARE_HEALTHY = PhysicalGPUConditionType.HARDWARE_HEALTHY
UNHEALTHY = "GPUHardwareUnhealthy"


@pytest.fixture(scope="module")
def gpu_host(node_pool: Any) -> RealNode:
    """A real node with two A30s for this module alone."""
    node: RealNode = node_pool.get(NodeConfig(name="e2e-gpuctl", gpu_fixture=FIXTURES / "a30-x2"))
    return node


@pytest.fixture(scope="module")
def stack(
    kube: KubeClient,
    control_plane: ControlPlane,
    gpu_host: RealNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GpuStack]:
    namespace = f"gpuctl-{uuid.uuid4().hex[:8]}"
    kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=namespace)))
    gpu_stack = GpuStack(
        plane=control_plane,
        work=tmp_path_factory.mktemp("gpu-stack"),
        namespace=namespace,
        config=CONFIG,
        config_key=OPERATOR_CONFIG_KEY,
        pci_ids=FIXTURES.parent / "pci.ids",
        driver_version=DRIVER_VERSION,
    )
    gpu_stack.create_config(kube, gpu_host.base.parent)
    # gpu-controller judges every NVIDIA card of the cluster, the session's other nodes' too (their
    # DriverReady is the stand-in's, mark_driver_ready); what it wrote there is put back afterwards.
    stood_in = [
        str(g.metadata.name)
        for g in kube.list(PHYSICAL_GPU)[0]
        if any(
            c.type == "DriverReady" and c.status == "True"
            for c in (g.status.conditions if g.status else None) or []
        )
    ]
    try:
        gpu_stack.start_controller()
        gpu_stack.start_node(gpu_host)
        yield gpu_stack
    finally:
        # Uninstall: the ConfigMap's deletion takes the DaemonSets and their Pods with it.
        with contextlib.suppress(NotFoundError):
            kube.delete(CONFIG_MAP, CONFIG, namespace)
        wait_until(lambda: not pods(kube, namespace), timeout=120, what="the node components' Pods to go")
        gpu_stack.stop()
        own = {str(gpu.metadata.name) for gpu in cards(kube, gpu_host.name)}
        for name in own:
            kube.delete(PHYSICAL_GPU, name)
        mark_driver_ready(control_plane, [name for name in stood_in if name not in own])
        # The gate labels the controller set on any node (others' cards included) go with it.
        gates = {LABEL_NVIDIA_PRESENT: None, LABEL_DRIVER_READY: None}
        for node in kube.list(NODE)[0]:
            kube.patch(NODE, name_of(node), {"metadata": {"labels": gates}}, patch_type=PatchType.MERGE)
        kube.delete(NAMESPACE, namespace)


@contextlib.contextmanager
def alerting(control_plane: ControlPlane, stack: GpuStack, tmp_path: Path) -> Iterator[Prometheus]:
    """A Prometheus server scraping gpu-controller every second through kube-rbac-proxy with a
    metrics reader's token, evaluating the chart's alerts every second; GPUNotDriverReady and
    GPUHardwareUnhealthy fire after 2 s instead of the shipped 15 m and 5 m (the test's values)."""
    [controller] = [p for p in stack.processes if p.name == "gpu-controller"]
    [port] = [int(a.rsplit(":", 1)[1]) for a in controller.argv if a.startswith("--metrics-bind-address=")]
    values = {"alerts.driverNotReadyFor": "2s", "alerts.hardwareUnhealthyFor": "2s"}
    rules = chart_alert_rules(tmp_path / "alerts.yaml", values, "1s")
    try:
        token = reader_token(control_plane, stack.namespace)
        with (
            metrics_proxy(control_plane, port, tmp_path) as proxy,
            prometheus(tmp_path / "prometheus", {"gpu-controller": proxy}, token, [rules]) as server,
        ):
            yield server
    finally:
        delete_reader(control_plane, stack.namespace)


def pods(
    kube: KubeClient, namespace: str, component: str | None = None, node: str | None = None
) -> list[V1Pod]:
    selector = (
        f"{LABEL_COMPONENT}={component}" if component else "app.kubernetes.io/managed-by=gpu-controller"
    )
    fields = f"spec.nodeName={node}" if node else None
    items, _ = kube.list(POD, namespace=namespace, label_selector=selector, field_selector=fields)
    return items


def ready(pod: V1Pod) -> bool:
    return meta(pod).deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True"
        for c in (pod.status.conditions if pod.status else None) or []
    )


def running_on(kube: KubeClient, namespace: str, node: str) -> dict[str, V1Pod]:
    """The node components' Ready Pods on ``node``, by component."""
    return {str(labels_of(p)[LABEL_COMPONENT]): p for p in pods(kube, namespace, node=node) if ready(p)}


def test_a_card_is_offered_only_while_its_validator_pod_is_ready(
    kube: KubeClient, control_plane: ControlPlane, stack: GpuStack, gpu_host: RealNode, tmp_path: Path
) -> None:
    node, namespace = gpu_host.name, stack.namespace
    samples: list[tuple[int, set[tuple[str, str]], bool]] = []

    def sample() -> bool:
        # In this order: offers, then DriverReady, then the Pod. Each can only turn on in this phase,
        # so a later read seeing "off" after an earlier one saw "on" would be a broken chain.
        published = offers(kube, node)
        condition = driver_ready(kube, node)
        validator = any(ready(p) for p in pods(kube, namespace, "gpu-validator", node))
        samples.append((published, condition, validator))
        return published == 2 * OFFERS_PER_A30

    stack.wait(sample, timeout=180, what="the cards offered after the validator's Pod is Ready")
    for published, condition, validator in samples:
        if published:
            assert condition == {("True", "Validated")}, samples
        if condition == {("True", "Validated")}:
            assert validator, samples
    assert samples[0][0] == 0, "offers existed before the test could see the validator"
    assert any(condition != {("True", "Validated")} for _, condition, _ in samples), (
        "never saw the card not ready"
    )
    stack.wait(
        lambda: gates(kube, node) == {LABEL_NVIDIA_PRESENT: "true", LABEL_DRIVER_READY: "true"},
        timeout=30,
        what="both gates",
    )
    stack.wait(
        lambda: set(running_on(kube, namespace, node)) == {"gpu-validator", *EVERYWHERE, *DRIVER_READY_ONLY},
        timeout=120,
        what="every component Ready on the GPU node",
    )

    # Started only now: the start above is what the samples must see from its beginning.
    with alerting(control_plane, stack, tmp_path) as server:
        _fail_and_recover(kube, stack, gpu_host, server)


def _fail_and_recover(kube: KubeClient, stack: GpuStack, gpu_host: RealNode, alerting: Prometheus) -> None:
    node, namespace = gpu_host.name, stack.namespace
    time.sleep(3)  # a few evaluations over DriverReady cards: nothing pending, nothing firing
    assert not _not_ready_alerts(alerting, node) | _not_ready_alerts(alerting, node, "pending")
    # Deleting the validator Pod takes the offers away; a missing device node keeps them away.
    dev = gpu_host.host.dev
    (dev / "nvidiactl").rename(dev / "nvidiactl.hidden")
    try:
        [validator_pod] = pods(kube, namespace, "gpu-validator", node)
        kube.delete(POD, name_of(validator_pod), namespace)
        failed = {("False", "Error"), ("False", "CrashLoopBackOff")}  # the kubelet alternates between them
        stack.wait(
            lambda: bool(driver_ready(kube, node)) and driver_ready(kube, node) <= failed,
            timeout=120,
            what="DriverReady=False from the failing validation",
        )
        # Each card says why, whichever step of the kubelet's retries it last saw.
        messages = {
            c.message
            for g in cards(kube, node)
            for c in status_of(g).conditions or []
            if c.type == "DriverReady"
        }
        assert all(f"missing /host/{node}/host/dev/nvidiactl" in m for m in messages), messages
        stack.wait(lambda: offers(kube, node) == 0, timeout=60, what="the offers withdrawn")
        # The chart's alert, in a Prometheus that scraped gpu-controller: firing for each card.
        started = time.monotonic()
        stack.wait(
            lambda: _not_ready_alerts(alerting, node) == {name_of(g) for g in cards(kube, node)},
            timeout=60,
            what="GPUNotDriverReady to fire for both cards",
        )
        print(f"\nGPUNotDriverReady firing {time.monotonic() - started:.1f} s after the offers went")
        stack.wait(
            lambda: gates(kube, node) == {LABEL_NVIDIA_PRESENT: "true"},
            timeout=30,
            what="the driver-ready gate gone",
        )
        stack.wait(
            lambda: (
                not set(DRIVER_READY_ONLY)
                & {str(labels_of(p)[LABEL_COMPONENT]) for p in pods(kube, namespace, node=node)}
            ),
            timeout=120,
            what="gpu-handler, nv-hostengine and dcgm-exporter to leave the node",
        )
    finally:
        (dev / "nvidiactl.hidden").rename(dev / "nvidiactl")
    [failing] = pods(kube, namespace, "gpu-validator", node)
    kube.delete(POD, name_of(failing), namespace)  # a new Pod skips the crash-loop back-off
    stack.wait(lambda: offers(kube, node) == 2 * OFFERS_PER_A30, timeout=180, what="the offers back")
    assert driver_ready(kube, node) == {("True", "Validated")}
    started = time.monotonic()
    stack.wait(
        lambda: not _not_ready_alerts(alerting, node) and not _not_ready_alerts(alerting, node, "pending"),
        timeout=60,
        what="GPUNotDriverReady to resolve",
    )
    print(f"GPUNotDriverReady resolved {time.monotonic() - started:.1f} s after DriverReady was back")


def _not_ready_alerts(server: Prometheus, node: str, state: str = "firing") -> set[str]:
    """The cards of ``node`` that GPUNotDriverReady is ``state`` for."""
    return _alerted_cards(server, "GPUNotDriverReady", node, state)


def _alerted_cards(server: Prometheus, alert: str, node: str, state: str = "firing") -> set[str]:
    """The cards of ``node`` that ``alert`` is ``state`` for."""
    return {a["name"] for a in server.alerts(alert, state) if a.get("node") == node}


def _hardware_healthy(kube: KubeClient, node: str) -> dict[str, tuple[str, str]]:
    """(status, reason) of HardwareHealthy by card name; ("missing", "") for a card without."""
    found = {}
    for gpu in cards(kube, node):
        condition = next((c for c in status_of(gpu).conditions or [] if c.type == HARDWARE_HEALTHY), None)
        found[name_of(gpu)] = (condition.status, condition.reason) if condition else ("missing", "")
    return found


def test_a_card_made_unhealthy_fires_gpu_hardware_unhealthy_until_it_recovers(
    kube: KubeClient, control_plane: ControlPlane, stack: GpuStack, gpu_host: RealNode, tmp_path: Path
) -> None:
    node = gpu_host.name
    stack.wait(
        lambda: (
            set(_hardware_healthy(kube, node).values()) == {("True", "Healthy")}
            and driver_ready(kube, node) == {("True", "Validated")}
        ),
        timeout=180,
        what="both cards HardwareHealthy and DriverReady",
    )
    by_address = {}
    for gpu in cards(kube, node):
        pci = status_of(gpu).pci_info
        assert pci is not None, gpu
        by_address[pci.address] = name_of(gpu)
    address = min(by_address)
    sick, other = by_address[address], by_address[max(by_address)]
    assert sick != other, by_address
    health_file = gpu_host.host.nvml_state / f"{address}{HEALTH_FILE_SUFFIX}"
    with alerting(control_plane, stack, tmp_path) as server:
        time.sleep(3)  # a few evaluations over healthy cards: nothing pending, nothing firing
        assert not _alerted_cards(server, UNHEALTHY, node) | _alerted_cards(
            server, UNHEALTHY, node, "pending"
        )
        try:
            health_file.write_text("False RowRemappingFailed row remapping failed on bank 3\n")
            made_sick = time.monotonic()
            stack.wait(
                lambda: _hardware_healthy(kube, node)[sick] == ("False", "RowRemappingFailed"),
                timeout=60,
                what="HardwareHealthy=False from gpu-handler",
            )
            condition_false = time.monotonic()
            stack.wait(
                lambda: _alerted_cards(server, UNHEALTHY, node) == {sick},
                timeout=60,
                what="GPUHardwareUnhealthy to fire for the sick card",
            )
            fired = time.monotonic()
            # The other card stayed healthy, and no alert names it.
            assert _hardware_healthy(kube, node)[other] == ("True", "Healthy")
            assert other not in _alerted_cards(server, UNHEALTHY, node, "pending")
        finally:
            health_file.unlink(missing_ok=True)
        recovered = time.monotonic()
        stack.wait(
            lambda: _hardware_healthy(kube, node)[sick] == ("True", "Healthy"),
            timeout=60,
            what="HardwareHealthy=True after the recovery",
        )
        condition_true = time.monotonic()
        stack.wait(
            lambda: (
                not _alerted_cards(server, UNHEALTHY, node)
                | _alerted_cards(server, UNHEALTHY, node, "pending")
            ),
            timeout=60,
            what="GPUHardwareUnhealthy to resolve",
        )
        resolved = time.monotonic()
    print(
        f"\nGPUHardwareUnhealthy firing {fired - made_sick:.1f} s after the health file"
        f" ({fired - condition_false:.1f} s after HardwareHealthy=False);"
        f" resolved {resolved - recovered:.1f} s after its removal"
        f" ({resolved - condition_true:.1f} s after HardwareHealthy=True)"
    )


def test_daemon_sets_land_by_their_gates_and_a_joining_node_restarts_nothing(
    kube: KubeClient, stack: GpuStack, gpu_host: RealNode, node_pool: Any
) -> None:
    namespace = stack.namespace
    everything = {"gpu-validator", *EVERYWHERE, *DRIVER_READY_ONLY}
    before = stack.wait(
        lambda: (found := running_on(kube, namespace, gpu_host.name)) and set(found) == everything and found,
        what="every component Ready on the GPU node",
    )
    generations = {name_of(ds): meta(ds).generation for ds in kube.list(DAEMON_SET, namespace=namespace)[0]}

    joined = node_pool.get(NodeConfig(name="e2e-gpuctl-join", gpu_fixture=FIXTURES / "no-gpu"))
    agent = stack.wait(
        lambda: running_on(kube, namespace, joined.name).get("gpu-node-agent"),
        what="the node agent on the joined node",
    )
    time.sleep(5)  # the DaemonSet controller had every chance to place the others there too
    assert set(running_on(kube, namespace, joined.name)) == {"gpu-node-agent"}
    assert {str(labels_of(p)[LABEL_COMPONENT]) for p in pods(kube, namespace, node=joined.name)} == {
        "gpu-node-agent"
    }
    after = running_on(kube, namespace, gpu_host.name)
    assert {c: uid_of(p) for c, p in after.items()} == {c: uid_of(p) for c, p in before.items()}
    assert all(
        sum(s.restart_count for s in status_of(p).container_statuses or []) == 0 for p in after.values()
    )
    assert {
        name_of(ds): meta(ds).generation for ds in kube.list(DAEMON_SET, namespace=namespace)[0]
    } == generations

    # A control-plane node runs no node agent: the label alone moves it, the template stays.
    role = {"node-role.kubernetes.io/control-plane": ""}
    kube.patch(NODE, joined.name, {"metadata": {"labels": role}}, patch_type=PatchType.MERGE)
    try:
        stack.wait(
            lambda: not pods(kube, namespace, node=joined.name),
            timeout=120,
            what="the agent off the control-plane node",
        )
        assert uid_of(agent) not in {uid_of(p) for p in pods(kube, namespace)}
    finally:
        kube.patch(
            NODE,
            joined.name,
            {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": None}}},
            patch_type=PatchType.MERGE,
        )
    assert {c: uid_of(p) for c, p in running_on(kube, namespace, gpu_host.name).items()} == {
        c: p.metadata.uid for c, p in before.items()
    }
