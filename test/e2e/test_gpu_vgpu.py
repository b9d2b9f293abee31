"""vGPUs on a real node: the sample VM Pod gets a mediated device, and deleting it removes the mdev.

The Pod is ``config/samples/pod-vgpu.yaml`` (annotation ``gpu.deckhouse.io/vfio: "true"`` and one
``gpu.deckhouse.io/vgpu``), run with the local busybox image and a script that shows what a VM
launcher would use. The real scheduler allocates one of the T4s' vGPU offers, the real kubelet
calls gpu-handler, which creates the mdev through the simulated host's sysfs (the simulated
kernel makes the mdev, its IOMMU group and ``/dev/vfio/<group>``), and containerd applies the CDI
spec. The device metadata the container sees is read with our reader of the KEP-5304 format.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import V1Pod
from testutil.e2e.gpu_nodes import checkpoint, crashed, normal_handler, pod_gone, restart_handler

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD
from pkg.gpuhandler.preparation.kinds.vm.files import read_device_metadata

SAMPLE = Path(__file__).resolve().parents[2] / "config" / "samples" / "pod-vgpu.yaml"
SHOW_VGPU = (
    "for d in /dev/vfio/*; do [ -c $d ] && echo node=$d; done; "
    "echo METADATA=$(cat /var/run/kubernetes.io/dra-device-attributes/resourceclaims/*/*/"
    "gpu.deckhouse.io-metadata.json); "
    "echo shown; exec sleep 3600"
)


def vgpu_pod(name: str, node: str) -> V1Pod:
    """The sample, on ``node``, with the local image and a script instead of virt-launcher."""
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"]["name"] = name
    spec = body["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    spec["restartPolicy"] = "Never"
    spec["terminationGracePeriodSeconds"] = 1
    [container] = spec["containers"]
    container.update(image=BUSYBOX_IMAGE, imagePullPolicy="Never", command=["sh", "-c", SHOW_VGPU])
    limits = container["resources"]["limits"]
    container["resources"]["limits"] = {key: str(value) for key, value in limits.items()}
    return V1Pod.model_validate(body)


def _mdevs(node: RealNode) -> list[str]:
    folder = node.host.root / "bus" / "mdev" / "devices"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _recorded(node: RealNode) -> str:
    [record] = checkpoint(node).values()
    return str(record["devices"][0]["vgpu"]["mdevUUID"])


def _group(node: RealNode, uuid: str) -> str:
    return (node.host.root / "bus" / "mdev" / "devices" / uuid / "iommu_group").readlink().name


def _logs(plane: ControlPlane, namespace: str, name: str) -> str:
    return plane.kubectl("logs", "-n", namespace, name, check=False)


def _shown(plane: ControlPlane, namespace: str, name: str, timeout: float = 120) -> dict[str, Any]:
    wait_until(lambda: "shown" in _logs(plane, namespace, name), timeout=timeout, what=f"Pod {name} to run")
    lines = _logs(plane, namespace, name).splitlines()
    return {
        "nodes": sorted(line.split("=", 1)[1] for line in lines if line.startswith("node=")),
        "metadata": next(line for line in lines if line.startswith("METADATA="))[9:],
    }


def _clean(node: RealNode) -> bool:
    return not checkpoint(node) and not _mdevs(node)


def _gpus(plane: ControlPlane, node: str) -> list[dict[str, Any]]:
    out = plane.kubectl("get", "physicalgpus", "-l", f"gpu.deckhouse.io/node={node}", "-o", "json")
    return list(json.loads(out)["items"])


def _offered_types(plane: ControlPlane, node: str, card: str) -> set[str]:
    """The type numbers of ``card``'s vGPU offers in the node's ResourceSlices now."""
    out = plane.kubectl("get", "resourceslices", f"--field-selector=spec.nodeName={node}", "-o", "json")
    prefix = "gpu-" + card.replace(":", "-").replace(".", "-") + "-vgpu-"
    names = [d["name"] for s in json.loads(out)["items"] for d in s["spec"].get("devices") or []]
    return {n[len(prefix) :].split("-")[0] for n in names if n.startswith(prefix)}


ALL_TYPES = {"232", "233", "234", "319"}


def _check_handed_over(node: RealNode, seen: dict[str, Any]) -> str:
    """The container saw the recorded mdev's VFIO group node and metadata naming it; its UUID."""
    uuid = _recorded(node)
    assert _mdevs(node) == [uuid]  # the simulated kernel holds exactly the recorded mdev
    group = _group(node, uuid)
    assert seen["nodes"] == sorted([f"/dev/vfio/{group}", "/dev/vfio/vfio"])
    [device] = read_device_metadata(seen["metadata"])
    assert device.mdev_uuid == uuid
    assert device.pci_bus_id is None
    return uuid


def test_a_vm_pod_gets_a_vgpu_and_deleting_it_removes_the_mdev(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node_vgpu: GpuComponents
) -> None:
    node = gpu_node_vgpu.node
    started = time.monotonic()
    kube.create(POD, vgpu_pod("vm", node.name), namespace=namespace)
    seen = _shown(control_plane, namespace, "vm")
    prepared_in = time.monotonic() - started

    _check_handed_over(node, seen)
    [record] = checkpoint(node).values()
    assert record["devices"][0]["deviceType"] == "VGPU"
    card, kind = record["devices"][0]["card"], record["devices"][0]["vgpu"]["mdevType"].rsplit("-", 1)[1]
    wait_until(  # equal-size mode: the kernel takes only more of this type, and the offers follow
        lambda: _offered_types(control_plane, node.name, card) == {kind},
        timeout=60,
        what=f"the other vGPU types of {card} to be withdrawn",
    )
    time.sleep(8)  # more than one enrichment period (5 s) and publish pass
    for gpu in _gpus(control_plane, node.name):  # a card with vGPUs is allocated, not broken
        conditions = {c["type"]: c["status"] for c in gpu["status"]["conditions"]}
        assert conditions.get("HardwareHealthy") == "True"

    started = time.monotonic()
    kube.delete(POD, "vm", namespace)
    wait_until(lambda: _clean(node), timeout=90, what="the mdev to be removed")
    released_in = time.monotonic() - started
    print(f"\nvGPU e2e: Pod running in {prepared_in:.1f} s, mdev removed {released_in:.1f} s after delete")
    wait_until(lambda: pod_gone(kube, namespace, "vm"), timeout=60, what="the Pod to go")
    wait_until(
        lambda: _offered_types(control_plane, node.name, card) == ALL_TYPES,
        timeout=60,
        what=f"every vGPU type of {card} to be offered again",
    )


# -- kill -9 after each vGPU step --------------------------------------------------------------------


@pytest.fixture
def vgpu_handler(gpu_node_vgpu: GpuComponents) -> Iterator[GpuComponents]:
    yield from normal_handler(gpu_node_vgpu)


@pytest.mark.parametrize("step", ["record-started", "prepare-devices", "write-cdi-spec"])
def test_a_crash_after_a_vgpu_prepare_step_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, vgpu_handler: GpuComponents, step: str
) -> None:
    node = vgpu_handler.node
    restart_handler(vgpu_handler, crash_at=f"prepare:{step}:after")
    kube.create(POD, vgpu_pod("vm", node.name), namespace=namespace)
    crashed(vgpu_handler)
    [record] = checkpoint(node).values()
    assert record["state"] == "PrepareStarted"  # the UUID is recorded whatever exists
    if step != "record-started":
        assert _mdevs(node) == [_recorded(node)]  # made, and owned by the record

    restart_handler(vgpu_handler)  # start-up removes it; the kubelet's retry makes it again
    seen = _shown(control_plane, namespace, "vm", timeout=180)
    _check_handed_over(node, seen)
    assert next(iter(checkpoint(node).values()))["state"] == "PrepareCompleted"

    kube.delete(POD, "vm", namespace)
    wait_until(lambda: _clean(node), timeout=90, what="the mdev to be removed")
    wait_until(lambda: pod_gone(kube, namespace, "vm"), timeout=60, what="the Pod to go")


def test_a_crash_after_the_vgpu_is_released_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, vgpu_handler: GpuComponents
) -> None:
    node = vgpu_handler.node
    kube.create(POD, vgpu_pod("vm", node.name), namespace=namespace)
    _shown(control_plane, namespace, "vm")
    restart_handler(vgpu_handler, crash_at="unprepare:release-claim:after")

    kube.delete(POD, "vm", namespace)
    crashed(vgpu_handler)
    assert not _mdevs(node)  # removed, but the claim is still recorded
    assert checkpoint(node)
    restart_handler(vgpu_handler)

    wait_until(lambda: pod_gone(kube, namespace, "vm"), timeout=120, what="the Pod to finish terminating")
    wait_until(lambda: _clean(node), timeout=90, what="the node to be clean again")
