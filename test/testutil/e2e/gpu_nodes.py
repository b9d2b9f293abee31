"""Helpers of the e2e tier for nodes with our components: what a container saw, what the node holds.

The simulated driver's state, the CDI folder and the checkpoint are read from the node's files,
the way an operator would look at a real node (nvidia-smi, /var/run/cdi, the plugin's folder).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.client import (
    CoreV1ResourceClaim,
    ResourceV1ResourceClaim,
    V1CapacityRequirements,
    V1CELDeviceSelector,
    V1DeviceClaim,
    V1DeviceClaimConfiguration,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1Pod,
    V1PodResourceClaim,
    V1ResourceClaimSpec,
    V1ResourceRequirements,
)

from pkg.backends.nvidia.sharing import daemon_pid
from pkg.backends.simulated.mps_daemon import MARKER
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM
from pkg.gpuhandler.preparation.crash import CRASH_AT_ENV
from testutil.e2e.pods import shell_pod
from testutil.k8s_fields import name_of, spec_of

DRIVER = "gpu.deckhouse.io"
SHOW_DEVICES = (
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
    "for d in /dev/nvidia* /dev/nvidia-caps/*; do [ -c $d ] && echo node=$d; done; echo shown; "
    "exec sleep 3600"  # keep running: the kubelet unprepares a Pod's claims once it has finished
)


def gpu_pod(name: str, resource: str, *, node: str, script: str = SHOW_DEVICES, count: int = 1) -> V1Pod:
    """A Pod asking for ``count`` of an extended resource of our classes (the one-line UX); by
    default it prints what it sees and keeps running."""
    pod = shell_pod(name, script, node=node)
    spec_of(pod).containers[0].resources = V1ResourceRequirements(
        limits={f"{DRIVER}/{resource}": str(count)}, requests={f"{DRIVER}/{resource}": str(count)}
    )
    return pod


SHOW_SHARE = (
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
    "echo THREADS=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; echo MEMORY=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; "
    "echo PIPE=$CUDA_MPS_PIPE_DIRECTORY; "
    "[ -f /tmp/nvidia-mps/nvidia-cuda-mps-control.pid ] && echo DAEMON=$(cat /tmp/nvidia-mps/*.pid); "
    "[ -f /dev/shm/sim-mps-server ] && echo SHM=$(cat /dev/shm/sim-mps-server); "
    "echo shown; exec sleep 3600"
)


def shared_claim(
    name: str,
    device_class: str,
    *,
    share_percent: int,
    card: str,
    config: Mapping[str, Any] | None = None,
) -> ResourceV1ResourceClaim:
    """A claim for ``share_percent`` of ``card`` through a sharing class, with our opaque config."""
    selector = f'device.attributes["{DRIVER}"].pciAddress == "{card}"'
    configs = []
    if config is not None:
        configs.append(
            V1DeviceClaimConfiguration(
                requests=["gpu"], opaque=V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=dict(config))
            )
        )
    request = V1ExactDeviceRequest(
        device_class_name=device_class,
        selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=selector))],
        capacity=V1CapacityRequirements(requests={"sharePercent": str(share_percent)}),
    )
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(requests=[V1DeviceRequest(name="gpu", exactly=request)], config=configs)
        ),
    )


def claim_pod(name: str, claim: str, *, node: str, script: str = SHOW_SHARE) -> V1Pod:
    """A Pod using the ResourceClaim ``claim``; by default it prints what a share sees and keeps running."""
    pod = shell_pod(
        name, script, node=node, resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name=claim)]
    )
    spec_of(pod).containers[0].resources = V1ResourceRequirements(claims=[CoreV1ResourceClaim(name="gpu")])
    return pod


def run_shared(
    kube: KubeClient, plane: ControlPlane, namespace: str, claim: ResourceV1ResourceClaim, *, node: str
) -> dict[str, str]:
    """Creates ``claim`` and a Pod of the same name using it; returns what the Pod printed."""
    name = name_of(claim)
    kube.create(RESOURCE_CLAIM, claim, namespace=namespace)
    run_and_show(kube, plane, namespace, claim_pod(name, name, node=node))
    lines = plane.kubectl("logs", "-n", namespace, name).splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def card_state(node: RealNode, card: str) -> dict[str, Any]:
    """The simulated driver's state of ``card`` (compute mode, time slice, MIG mode)."""
    return dict(_driver_cards(node).get(card, {}))


def _driver_cards(node: RealNode) -> dict[str, Any]:
    """The simulated driver's state file, by card address (empty before the driver wrote it)."""
    path = node.host.nvml_state / "driver" / "driver.json"
    return dict(json.loads(path.read_text())["cards"]) if path.exists() else {}


def mps_daemon(components: GpuComponents, card: str) -> int | None:
    """The PID of the card's MPS control daemon if it runs."""
    return mps_daemon_in(components.mps_root, card)


def mps_daemon_in(mps_root: Path, card: str) -> int | None:
    """The PID of the card's MPS control daemon under gpu-handler's ``--mps-root`` if it runs."""
    return daemon_pid(mps_root / card / "pipe", MARKER.encode())


@dataclass(frozen=True)
class Seen:
    """What a container printed with :data:`SHOW_DEVICES`."""

    visible: str
    nodes: list[str]

    @classmethod
    def parse(cls, log: str) -> Seen:
        lines = log.splitlines()
        visible = next(
            (line.split("=", 1)[1] for line in lines if line.startswith("NVIDIA_VISIBLE_DEVICES=")), ""
        )
        return cls(
            visible=visible, nodes=sorted(line.split("=", 1)[1] for line in lines if line.startswith("node="))
        )


def gpu_instances(node: RealNode) -> dict[str, list[tuple[int, int]]]:
    """The simulated driver's GPU instances per card: (profile ID, placement start)."""
    cards = _driver_cards(node)
    return {
        address: [(gi["profile_id"], gi["start"]) for gi in card["gpu_instances"]]
        for address, card in cards.items()
        if card["gpu_instances"]
    }


def mig_mode(node: RealNode, card: str) -> int:
    return int(card_state(node, card).get("mig_mode", 0))


def cdi_specs(node: RealNode) -> list[str]:
    return sorted(p.name for p in node.cdi_dir.glob("k8s.gpu.deckhouse.io-claim_*.json"))


def checkpoint(node: RealNode) -> dict[str, dict[str, Any]]:
    path = node.kubelet.paths.root / "plugins" / DRIVER / "checkpoint.json"
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text())["data"]["claims"])


def claim_names(components: GpuComponents) -> list[str]:
    return sorted(str(c["name"]) for c in checkpoint(components.node).values())


def run_and_show(
    kube: KubeClient, plane: ControlPlane, namespace: str, pod: V1Pod, *, timeout: float = 90.0
) -> Seen:
    """Creates ``pod`` and waits until it runs and has printed what it sees."""
    kube.create(POD, pod, namespace=namespace)
    name = name_of(pod)

    def shown() -> bool:
        return "shown" in plane.kubectl("logs", "-n", namespace, name, check=False)

    wait_until(shown, timeout=timeout, what=f"Pod {namespace}/{name} to run and show its devices")
    return Seen.parse(plane.kubectl("logs", "-n", namespace, name))


def pod_gone(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        kube.get(POD, name, namespace)
    except NotFoundError:
        return True
    return False


def restart_handler(components: GpuComponents, *, crash_at: str | None = None) -> None:
    """Restarts gpu-handler (``crash_at``: to kill itself there) and waits until it registered."""
    since = components.handler_log_size()
    components.restart_handler(env={CRASH_AT_ENV: crash_at} if crash_at else None)
    components.wait_registered(since=since)


def crashed(components: GpuComponents) -> None:
    """Until gpu-handler has killed itself at its crash point."""
    wait_until(lambda: not components.handler.running(), timeout=90, what="gpu-handler to crash on purpose")
    assert "crashing on purpose" in components.handler.tail(20)


def normal_handler(components: GpuComponents) -> Iterator[GpuComponents]:
    """A fixture body: the node's components; whatever a test did to the handler, it runs normally
    afterwards."""
    yield components
    if not components.handler.running() or components.handler.env:
        restart_handler(components)


def retire(plane: ControlPlane, node: str) -> None:
    """Takes a node whose GPU components a module stopped out of the session's later tests: the node
    stays (the pool stops it at the end), but it is cordoned and its ResourceSlices are deleted, so
    no later test's Pod is scheduled onto offers that no kubelet plugin serves any more."""
    plane.kubectl("cordon", node, check=False)
    plane.kubectl(
        "delete", "resourceslices", f"--field-selector=spec.nodeName={node}", "--wait=false", check=False
    )
