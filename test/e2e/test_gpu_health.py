"""Device health end to end on a real node: an injected XID taints the card's offers, reaches the
running Pod's status, keeps new Pods off the card or evicts the running one, turns the PhysicalGPU
unhealthy — and all of it clears after the card recovers, with no component restarted.

The XIDs are injected into the simulated driver the running gpu-handler reads through its NVML
event set (:mod:`pkg.backends.simulated.events`); "recovery" is the card's reset (the probe passes
again) followed by the quiet period (``--health-quiet-period=5`` on the e2e nodes).
The measured latencies are printed and written to ``test-artifacts/health-latencies.json``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes.client import (
    CoreV1ResourceClaim,
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1DeviceClaim,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1PodResourceClaim,
    V1ResourceClaimSpec,
    V1ResourceRequirements,
)
from testutil.e2e.gpu_nodes import DRIVER, checkpoint, pod_gone
from testutil.e2e.pods import shell_pod
from testutil.k8s_fields import meta, spec_of

from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.events import inject_event, recover
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.processes import wait_until
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.gpuhandler.health.taints import TAINT_KEY

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CARDS = ("0000:3b:00.0", "0000:d8:00.0")  # the a30-x2 host's
POD_NAMES = ("victim", "newcomer")  # each with a ResourceClaim of the same name


def _card_devices(kube: KubeClient, node: str, card: str) -> list[Any]:
    """The published devices (every offer) of the card at PCI address ``card``."""
    base = "gpu-" + card.replace(":", "-").replace(".", "-")
    slices, _ = kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node}")
    newest = max((s.spec.pool.generation for s in slices), default=0)
    return [
        d
        for s in slices
        if s.spec.pool.generation == newest
        for d in s.spec.devices or []
        if d.name == base or d.name.startswith(base + "-")
    ]


def _device_taints(kube: KubeClient, node: str, device: str) -> set[tuple[str, str, str]]:
    """The taints the node's published device ``device`` carries now (none while it is unpublished)."""
    slices, _ = kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node}")
    return {
        (t.key, t.value or "", t.effect)
        for s in slices
        for d in s.spec.devices or []
        if d.name == device
        for t in d.taints or []
    }


def _taints(kube: KubeClient, node: str, card: str) -> set[tuple[str, str, str]] | None:
    """The one set of taints every offer of the card carries; ``None`` while offers disagree."""
    devices = _card_devices(kube, node, card)
    seen = {frozenset((t.key, t.value or "", t.effect) for t in d.taints or []) for d in devices}
    return set(next(iter(seen))) if devices and len(seen) == 1 else None


def _health_of_pod(plane: ControlPlane, namespace: str, pod: str) -> list[str]:
    raw = json.loads(plane.kubectl("get", "pod", "-n", namespace, pod, "-o", "json"))
    statuses = raw.get("status", {}).get("containerStatuses") or []
    return [
        r.get("health", "")
        for c in statuses
        for s in c.get("allocatedResourcesStatus") or []
        for r in s.get("resources") or []
    ]


def _hardware_healthy(kube: KubeClient, card: str) -> tuple[str, str]:
    gpus, _ = kube.list(PHYSICAL_GPU)
    for gpu in gpus:
        if gpu.status and gpu.status.pci_info and gpu.status.pci_info.address == card:
            for c in gpu.status.conditions or []:
                if c.type == "HardwareHealthy":
                    return c.status, c.reason
    return "", ""


def _claim_pod(kube: KubeClient, namespace: str, name: str, *, node: str, card: str | None = None) -> None:
    """A Pod with a ResourceClaim of its own for a 1g MIG device (of ``card`` only, if given).

    Through ``resources.claims``, not the extended resource: the kubelet (1.37) reports
    ``allocatedResourcesStatus`` only for the claims a container lists there, so a Pod that asks
    for ``gpu.deckhouse.io/mig-1g`` gets its device but no health in its status."""
    selector = f'device.attributes["{DRIVER}"].pciAddress == "{card}"' if card else "true"
    claim = ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=[
                    V1DeviceRequest(
                        name="gpu",
                        exactly=V1ExactDeviceRequest(
                            device_class_name="gpu-mig-1g",
                            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=selector))],
                        ),
                    )
                ]
            )
        ),
    )
    kube.create(RESOURCE_CLAIM, claim, namespace=namespace)
    pod = shell_pod(
        name,
        "echo shown; exec sleep 3600",
        node=node,
        resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name=name)],
    )
    spec_of(pod).containers[0].resources = V1ResourceRequirements(claims=[CoreV1ResourceClaim(name="gpu")])
    kube.create(POD, pod, namespace=namespace)


def _phase_and_node(kube: KubeClient, namespace: str, name: str) -> tuple[str, str]:
    pod = kube.get(POD, name, namespace)
    return str(pod.status.phase if pod.status else ""), str(spec_of(pod).node_name or "")


def _evicted(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        pod = kube.get(POD, name, namespace)
    except NotFoundError:
        return True
    return meta(pod).deletion_timestamp is not None


def _pids(components: GpuComponents) -> tuple[int | None, ...]:
    """The handler's, the node agent's and the kubelet's process IDs: equal means not restarted."""
    procs = (components.handler, components.agent, components.node.kubelet.process)
    return tuple(p.process.pid if p.process is not None else None for p in procs)


def _first_seen(checks: dict[str, Callable[[], bool]], *, start: float, timeout: float) -> dict[str, float]:
    """Seconds from ``start`` until each check first held; fails naming the ones that never did."""
    seen: dict[str, float] = {}
    while len(seen) < len(checks) and time.monotonic() - start < timeout:
        for name, check in checks.items():
            if name not in seen and check():
                seen[name] = _since(start)
        time.sleep(0.1)
    missing = sorted(set(checks) - set(seen))
    assert not missing, f"not seen within {timeout:.0f}s: {missing} (seen: {seen})"
    return seen


def _since(start: float) -> float:
    return round(time.monotonic() - start, 2)


def test_an_xid_on_a_running_pods_mig_device_taints_reports_evicts_and_clears_without_restarts(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    try:
        _story(kube, control_plane, namespace, gpu_node)
    finally:
        _clean_up(kube, namespace, gpu_node)


def _clean_up(kube: KubeClient, namespace: str, components: GpuComponents) -> None:
    """Leaves the node as the next test expects it: cards healthy, claims unprepared, no instances."""
    driver = SimulatedDriverMemory(components.node.host.nvml_state / "driver")
    for card in CARDS:
        recover(driver, card)
    for name in POD_NAMES:
        with contextlib.suppress(NotFoundError):
            kube.delete(POD, name, namespace)
    for name in POD_NAMES:
        wait_until(
            functools.partial(pod_gone, kube, namespace, name),
            timeout=60,
            what=f"Pod {name} to go",
        )
        with contextlib.suppress(NotFoundError):
            kube.delete(RESOURCE_CLAIM, name, namespace)
    wait_until(
        lambda: not any(r["name"] in POD_NAMES for r in checkpoint(components.node).values()),
        timeout=60,
        what="the kubelet to unprepare the test's claims",
    )


def _story(kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents) -> None:
    node = gpu_node.node
    pids = _pids(gpu_node)
    _claim_pod(kube, namespace, "victim", node=node.name)
    wait_until(
        lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, "victim", check=False),
        timeout=90,
        what="the Pod to run",
    )
    [record] = [r for r in checkpoint(node).values() if r["name"] == "victim"]
    card = record["devices"][0]["card"]
    assert _taints(kube, node.name, card) == set()
    assert _hardware_healthy(kube, card) == ("True", "Healthy")
    driver = SimulatedDriverMemory(node.host.nvml_state / "driver")
    timings: dict[str, float] = {}

    # A degraded event (XID 94, contained ECC error): NoSchedule, the running Pod stays.
    degraded = {(TAINT_KEY, "Xid94ContainedEccError", "NoSchedule")}
    start = time.monotonic()
    inject_event(driver, card, xid=94)
    seen = _first_seen(
        {
            "event_to_taint_s": lambda: _taints(kube, node.name, card) == degraded,
            "event_to_pod_status_unhealthy_s": lambda: (
                "Unhealthy" in _health_of_pod(control_plane, namespace, "victim")
            ),
            "event_to_condition_false_s": lambda: (
                _hardware_healthy(kube, card) == ("False", "Xid94ContainedEccError")
            ),
        },
        start=start,
        timeout=60,
    )
    timings.update(seen)

    # A new Pod that can only use this card is not placed while the taint stands.
    _claim_pod(kube, namespace, "newcomer", node=node.name, card=card)
    time.sleep(10)  # longer than a scheduling attempt and a quiet period: the card stays tainted
    assert _phase_and_node(kube, namespace, "newcomer") == ("Pending", "")
    assert _taints(kube, node.name, card) == degraded  # the probe still fails: no recovery yet
    assert not _evicted(kube, namespace, "victim")

    # A fatal event (XID 48, double-bit ECC): NoExecute, the running Pod is evicted.
    fatal = {(TAINT_KEY, "Xid48DoubleBitEccError", "NoExecute")}
    victim_device = record["devices"][0]["device"]
    tainted_when_evicted: list[bool] = []

    def evicted() -> bool:
        if not _evicted(kube, namespace, "victim"):
            return False
        # Read after the eviction was seen, so a taint written before it is seen too: the eviction
        # must follow our NoExecute taint on the victim's own device. (The card's other offers may
        # be in another slice, written a moment later: their agreement is not what evicts.)
        tainted_when_evicted.append(fatal <= _device_taints(kube, node.name, victim_device))
        return True

    start = last_event = time.monotonic()
    inject_event(driver, card, xid=48)
    seen = _first_seen(
        {
            "fatal_event_to_eviction_s": evicted,
            "fatal_event_to_taint_s": lambda: _taints(kube, node.name, card) == fatal,
            "fatal_event_to_condition_reason_s": lambda: (
                _hardware_healthy(kube, card) == ("False", "Xid48DoubleBitEccError")
            ),
        },
        start=start,
        timeout=60,
    )
    timings.update(seen)
    assert tainted_when_evicted == [True]

    # Recovery: the card is reset; after the quiet period the taint goes and the waiting Pod lands.
    start = time.monotonic()
    recover(driver, card)
    seen = _first_seen(
        {
            "recovery_to_taint_removed_s": lambda: _taints(kube, node.name, card) == set(),
            "recovery_to_new_pod_running_s": lambda: (
                _phase_and_node(kube, namespace, "newcomer") == ("Running", node.name)
            ),
            "recovery_to_condition_true_s": lambda: _hardware_healthy(kube, card)[0] == "True",
        },
        start=start,
        timeout=90,
    )
    timings.update(seen)
    # Not before the quiet period (5 s on the e2e nodes) since the last event, and not before the reset.
    assert start + seen["recovery_to_taint_removed_s"] - last_event >= 5
    newcomer = checkpoint(node)
    assert [r["devices"][0]["card"] for r in newcomer.values() if r["name"] == "newcomer"] == [card]
    wait_until(
        lambda: _health_of_pod(control_plane, namespace, "newcomer") == ["Healthy"],
        timeout=60,
        what="the new Pod's device reported Healthy",
    )

    assert _pids(gpu_node) == pids  # nothing restarted
    assert gpu_node.handler.running()
    print(f"health latencies: {timings}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "health-latencies.json").write_text(json.dumps(timings, indent=1))
