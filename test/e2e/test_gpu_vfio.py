"""VFIO passthrough on real nodes: the sample VM Pod gets its card's IOMMU group, and gives it back.

The Pod is ``config/samples/pod-vfio.yaml`` (annotation ``gpu.deckhouse.io/vfio: "true"`` and one
``gpu.deckhouse.io/gpu``), run with the local busybox image and a script that shows what a VM
launcher would use. The real scheduler allocates, the real kubelet calls gpu-handler, which binds
through the simulated host's sysfs (the simulated kernel moves the driver links and makes
``/dev/vfio/<group>``), and containerd applies the CDI spec. Refusals are checked where a user
looks: the claim's ``PrepareFailed`` event and the Pod's events.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import V1Pod
from testutil.e2e.gpu_nodes import (
    checkpoint,
    claim_pod,
    crashed,
    normal_handler,
    pod_gone,
    restart_handler,
    shared_claim,
)
from testutil.k8s_fields import meta, name_of, status_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

SAMPLE = Path(__file__).resolve().parents[2] / "config" / "samples" / "pod-vfio.yaml"
RTX, RTX_AUDIO, GROUP = "0000:65:00.0", "0000:65:00.1", "28"
SHOW_VFIO = (
    "for d in /dev/vfio/*; do [ -c $d ] && echo node=$d; done; "
    "echo METADATA=$(cat /var/run/kubernetes.io/dra-device-attributes/resourceclaims/*/*/"
    "gpu.deckhouse.io-metadata.json); "
    "echo HOOK=$(cat /var/run/gpu.deckhouse.io/vfio/*.json); "
    "echo shown; exec sleep 3600"
)


def vfio_pod(name: str, node: str, *, script: str = SHOW_VFIO, resource: str = "gpu") -> V1Pod:
    """The sample, on ``node``, with the local image and a script instead of virt-launcher.

    The sample asks for a VM host's card (gpu-vm-passthrough); the workstation's card is not one,
    so by default the Pod asks for any exclusive whole card (gpu-physical), as the sample says a VM
    Pod may."""
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"]["name"] = name
    spec = body["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    spec["restartPolicy"] = "Never"
    spec["terminationGracePeriodSeconds"] = 1
    [container] = spec["containers"]
    container.update(image=BUSYBOX_IMAGE, imagePullPolicy="Never", command=["sh", "-c", script])
    container["resources"]["limits"] = {f"gpu.deckhouse.io/{resource}": "1"}
    return V1Pod.model_validate(body)


def _driver(node: RealNode, address: str) -> str | None:
    link = node.host.root / "bus" / "pci" / "devices" / address / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def _override(node: RealNode, address: str) -> str:
    return (node.host.root / "bus" / "pci" / "devices" / address / "driver_override").read_text().strip()


def _given_back(node: RealNode) -> bool:
    return (
        not checkpoint(node)
        and _driver(node, RTX) == "nvidia"
        and _driver(node, RTX_AUDIO) == "snd_hda_intel"
        and _override(node, RTX) in ("", "(null)")
        and _override(node, RTX_AUDIO) in ("", "(null)")
        and not (node.host.dev / "vfio" / GROUP).exists()
    )


def _logs(plane: ControlPlane, namespace: str, name: str) -> str:
    return plane.kubectl("logs", "-n", namespace, name, check=False)


def _shown(plane: ControlPlane, namespace: str, name: str, timeout: float = 120) -> dict[str, Any]:
    wait_until(lambda: "shown" in _logs(plane, namespace, name), timeout=timeout, what=f"Pod {name} to run")
    lines = _logs(plane, namespace, name).splitlines()
    return {
        "nodes": sorted(line.split("=", 1)[1] for line in lines if line.startswith("node=")),
        "metadata": json.loads(next(line for line in lines if line.startswith("METADATA="))[9:]),
        "hook": json.loads(next(line for line in lines if line.startswith("HOOK="))[5:]),
    }


def _gpu(plane: ControlPlane, node: str) -> dict[str, Any]:
    out = plane.kubectl("get", "physicalgpus", "-l", f"gpu.deckhouse.io/node={node}", "-o", "json")
    [gpu] = json.loads(out)["items"]
    return dict(gpu)


def _pool(plane: ControlPlane, node: str) -> tuple[int, list[str]]:
    """The node's pool generation and the names of its devices."""
    out = plane.kubectl("get", "resourceslices", f"--field-selector=spec.nodeName={node}", "-o", "json")
    slices = json.loads(out)["items"]
    generation = max(int(s["spec"]["pool"]["generation"]) for s in slices)
    names = sorted(d["name"] for s in slices for d in s["spec"].get("devices") or [])
    return generation, names


def test_a_vm_pod_gets_its_cards_iommu_group_and_the_drivers_come_back(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node_ws: GpuComponents
) -> None:
    node = gpu_node_ws.node
    before = _pool(control_plane, node.name)
    started = time.monotonic()
    kube.create(POD, vfio_pod("vm", node.name), namespace=namespace)
    seen = _shown(control_plane, namespace, "vm")
    prepared_in = time.monotonic() - started

    assert (_driver(node, RTX), _driver(node, RTX_AUDIO)) == ("vfio-pci", "vfio-pci")  # the whole group
    assert _override(node, RTX) == "vfio-pci"
    assert seen["nodes"] == [f"/dev/vfio/{GROUP}", "/dev/vfio/vfio"]
    assert seen["metadata"]["kind"] == "DeviceMetadata"
    [request] = seen["metadata"]["requests"]
    [device] = request["devices"]
    assert device["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": RTX}
    [hooked] = seen["hook"]["devices"]
    assert (hooked["pciBusID"], hooked["iommuGroup"]) == (RTX, GROUP)
    [record] = checkpoint(node).values()
    assert [f["driver"] for f in record["devices"][0]["vfio"]["functions"]] == ["nvidia", "snd_hda_intel"]

    # gpu-node-agent sees the card on vfio-pci: the card stays allocated, not broken, and on offer.
    wait_until(
        lambda: _gpu(control_plane, node.name)["status"]["currentState"]["driverType"] == "VFIO",
        timeout=90,
        what="gpu-node-agent to report driverType VFIO",
    )
    time.sleep(8)  # more than one enrichment period (5 s) and publish pass
    conditions = {c["type"]: c["status"] for c in _gpu(control_plane, node.name)["status"]["conditions"]}
    assert conditions.get("HardwareHealthy") == "True"
    assert _pool(control_plane, node.name) == before  # no withdrawal, no new generation

    started = time.monotonic()
    kube.delete(POD, "vm", namespace)
    wait_until(lambda: _given_back(node), timeout=90, what="the original drivers to be back")
    released_in = time.monotonic() - started
    print(f"\nVFIO e2e: Pod running in {prepared_in:.1f} s, drivers back {released_in:.1f} s after delete")
    wait_until(lambda: pod_gone(kube, namespace, "vm"), timeout=60, what="the Pod to go")
    wait_until(
        lambda: _gpu(control_plane, node.name)["status"]["currentState"]["driverType"] == "Nvidia",
        timeout=90,
        what="gpu-node-agent to report the NVIDIA driver again",
    )
    time.sleep(8)
    assert _pool(control_plane, node.name) == before  # no withdrawal on the way back either


def _events(plane: ControlPlane, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    out = plane.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        f"--field-selector=involvedObject.kind={kind},involvedObject.name={name}",
        "-o",
        "json",
    )
    return list(json.loads(out)["items"])


def _claim_of(kube: KubeClient, namespace: str, pod: str) -> str:
    claims, _ = kube.list(RESOURCE_CLAIM, namespace=namespace)
    [claim] = [c for c in claims if name_of(c).startswith(pod)]
    return name_of(claim)


def _refused(plane: ControlPlane, kube: KubeClient, namespace: str, pod: str, *words: str) -> None:
    """The claim's PrepareFailed event and the Pod's events carry the reason and the words."""

    def said(kind: str, name: str) -> bool:
        messages = [e.get("message", "") for e in _events(plane, namespace, kind, name)]
        return any(all(w in m for w in words) for m in messages)

    wait_until(lambda: bool(kube.list(RESOURCE_CLAIM, namespace=namespace)[0]), timeout=60, what="the claim")
    claim = _claim_of(kube, namespace, pod)
    wait_until(lambda: said("ResourceClaim", claim), timeout=90, what=f"a PrepareFailed event on {claim}")
    wait_until(lambda: said("Pod", pod), timeout=90, what=f"the refusal in Pod {pod}'s events")
    assert status_of(kube.get(POD, pod, namespace)).phase == "Pending"


def test_a_vm_pod_on_a_vm_node_is_refused_with_the_reason_on_the_claim_and_the_pod(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node_vm: GpuComponents
) -> None:
    node = gpu_node_vm.node
    kube.create(POD, vfio_pod("vm", node.name), namespace=namespace)

    _refused(control_plane, kube, namespace, "vm", "VfioNotAllowed", "only on bare metal", "QEMU")
    assert _driver(node, "0000:01:00.0") == "nvidia"
    assert not checkpoint(node)


def test_vfio_for_a_mig_device_or_a_share_is_refused(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, gpu_node: GpuComponents
) -> None:
    node = gpu_node.node
    kube.create(POD, vfio_pod("mig", node.name, resource="mig-1g"), namespace=namespace)
    _refused(control_plane, kube, namespace, "mig", "VfioNotAllowed", "MIG device")
    kube.delete(POD, "mig", namespace)

    claim = shared_claim("ts", "gpu-timeslicing", share_percent=50, card="0000:3b:00.0")
    kube.create(RESOURCE_CLAIM, claim, namespace=namespace)
    pod = claim_pod("ts", "ts", node=node.name)
    meta(pod).annotations = {"gpu.deckhouse.io/vfio": "true"}
    kube.create(POD, pod, namespace=namespace)
    _refused(control_plane, kube, namespace, "ts", "VfioNotAllowed", "TimeSlicing share")
    kube.delete(POD, "ts", namespace)
    wait_until(
        lambda: pod_gone(kube, namespace, "ts") and pod_gone(kube, namespace, "mig"), timeout=60, what="Pods"
    )
    assert not checkpoint(node)
    assert _driver(node, "0000:3b:00.0") == "nvidia"


# -- kill -9 where a passed-through card is bound, recorded and given back -----------------------------


@pytest.fixture
def ws_handler(gpu_node_ws: GpuComponents) -> Iterator[GpuComponents]:
    yield from normal_handler(gpu_node_ws)


@pytest.mark.parametrize("step", ["prepare-devices", "write-cdi-spec"])
def test_a_crash_after_a_vfio_prepare_step_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, ws_handler: GpuComponents, step: str
) -> None:
    node = ws_handler.node
    restart_handler(ws_handler, crash_at=f"prepare:{step}:after")
    kube.create(POD, vfio_pod("vm", node.name), namespace=namespace)
    crashed(ws_handler)
    assert _driver(node, RTX) == "vfio-pci"  # bound, never recorded as prepared

    restart_handler(ws_handler)  # start-up gives the group back; the kubelet's retry binds it again
    seen = _shown(control_plane, namespace, "vm", timeout=180)
    assert seen["nodes"] == [f"/dev/vfio/{GROUP}", "/dev/vfio/vfio"]
    [record] = checkpoint(node).values()
    assert record["state"] == "PrepareCompleted"
    assert [f["driver"] for f in record["devices"][0]["vfio"]["functions"]] == ["nvidia", "snd_hda_intel"]

    kube.delete(POD, "vm", namespace)
    wait_until(lambda: _given_back(node), timeout=90, what="the original drivers to be back")
    wait_until(lambda: pod_gone(kube, namespace, "vm"), timeout=60, what="the Pod to go")


@pytest.mark.parametrize("step", ["release-claim"])
def test_a_crash_after_a_vfio_unprepare_step_converges(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, ws_handler: GpuComponents, step: str
) -> None:
    node = ws_handler.node
    kube.create(POD, vfio_pod("vm", node.name), namespace=namespace)
    _shown(control_plane, namespace, "vm")
    restart_handler(ws_handler, crash_at=f"unprepare:{step}:after")

    kube.delete(POD, "vm", namespace)
    crashed(ws_handler)
    assert _driver(node, RTX) == "nvidia"  # given back, but the claim is still recorded
    assert checkpoint(node)
    restart_handler(ws_handler)

    wait_until(lambda: pod_gone(kube, namespace, "vm"), timeout=120, what="the Pod to finish terminating")
    wait_until(lambda: _given_back(node), timeout=90, what="the node to be clean again")
