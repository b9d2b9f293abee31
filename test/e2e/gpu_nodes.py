"""Helpers of the e2e tier for nodes with our components: what a container saw, what the node holds.

The simulated driver's state, the CDI folder and the checkpoint are read from the node's files,
the way an operator would look at a real node (nvidia-smi, /var/run/cdi, the plugin's folder).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kubernetes.client import V1Pod, V1ResourceRequirements
from pods import shell_pod

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD

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
    pod.spec.containers[0].resources = V1ResourceRequirements(
        limits={f"{DRIVER}/{resource}": str(count)}, requests={f"{DRIVER}/{resource}": str(count)}
    )
    return pod


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
    path = node.host.nvml_state / "driver" / "driver.json"
    if not path.exists():
        return {}
    cards = json.loads(path.read_text())["cards"]
    return {
        address: [(gi["profile_id"], gi["start"]) for gi in card["gpu_instances"]]
        for address, card in cards.items()
        if card["gpu_instances"]
    }


def mig_mode(node: RealNode, card: str) -> int:
    path = node.host.nvml_state / "driver" / "driver.json"
    cards = json.loads(path.read_text())["cards"] if path.exists() else {}
    return int(cards.get(card, {}).get("mig_mode", 0))


def cdi_specs(node: RealNode) -> list[str]:
    return sorted(p.name for p in node.cdi_dir.glob("k8s.gpu.deckhouse.io-claim_*.json"))


def checkpoint(node: RealNode) -> dict[str, dict[str, object]]:
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
    name = str(pod.metadata.name)

    def shown() -> bool:
        return "shown" in plane.kubectl("logs", "-n", namespace, name, check=False)

    wait_until(shown, timeout=timeout, what=f"Pod {namespace}/{name} to run and show its devices")
    return Seen.parse(plane.kubectl("logs", "-n", namespace, name))
