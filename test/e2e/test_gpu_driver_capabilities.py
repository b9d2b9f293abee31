"""A container gets the graphics and video parts of the driver through our CDI specs, and a claim
that asks for less gets exactly that, on the real node.

The node's stand-in driver (:mod:`pkg.devcluster.driverroot`) has driver 580's graphics and video
libraries and the loaders' files under the names real drivers use, in a folder of its own like
``/usr/local/nvidia``. A Pod whose claim names no capabilities gets the base spec, every capability
the root has (as NVIDIA's own spec gives): its container sees the Vulkan ICD and EGL vendor files
where the image's loaders read them, and its dynamic loader resolves ``libGLX_nvidia.so.0`` and
``libEGL_nvidia.so.0`` by soname, as glvnd's and Vulkan's loaders do. A claim whose config asks for
``[compute, utility]`` gets the capability specs of those two only: CUDA and ``nvidia-smi`` work,
and no graphics library or loader file is there; one asking for ``[video]`` gets NVENC and NVDEC.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClaim,
    V1DeviceClaimConfiguration,
    V1DeviceRequest,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1Pod,
    V1ResourceClaimSpec,
)
from testutil.e2e.gpu_nodes import DRIVER, checkpoint, claim_pod, gpu_pod, pod_gone
from testutil.k8s_fields import name_of, spec_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import GLIBC_IMAGE, LOAD_PROBE
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

LIBRARIES = "/usr/local/nvidia/lib64"
VULKAN_ICD = "/etc/vulkan/icd.d/nvidia_icd.json"
EGL_VENDOR = "/usr/share/glvnd/egl_vendor.d/10_nvidia.json"
PROBED = (
    "libcuda.so.1",
    "libnvidia-ml.so.1",
    "libGLX_nvidia.so.0",
    "libEGL_nvidia.so.0",
    "libnvidia-encode.so.1",
)
SHOW = (
    f"for f in {VULKAN_ICD} {EGL_VENDOR}; do test -f $f && echo file=$f; done; "
    f'grep -ho \'"library_path" *: *"[^"]*"\' {VULKAN_ICD} {EGL_VENDOR} 2>/dev/null | sed \'s/^/names=/\'; '
    + "".join(f"{LOAD_PROBE} {name} 2>/dev/null | sed 's/^/loaded=/'; " for name in PROBED)
    + "ldconfig -p | grep -F -e 'libGLX_nvidia.so.0 ' -e 'libEGL_nvidia.so.0 ' "
    "| sed 's/^[[:space:]]*/cache=/'; "
    "nvidia-smi >/dev/null && echo smi=ran; echo shown; exec sleep 3600"
)


Shown = Callable[[V1Pod], dict[str, list[str]]]


def _glibc(pod: V1Pod) -> V1Pod:
    spec_of(pod).containers[0].image = GLIBC_IMAGE
    return pod


def _claim(name: str, capabilities: Sequence[str]) -> ResourceV1ResourceClaim:
    """A claim for one whole card whose config asks for ``capabilities``."""
    parameters = {
        "apiVersion": f"{DRIVER}/v1alpha1",
        "kind": "GpuConfig",
        "driverCapabilities": list(capabilities),
    }
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=[
                    V1DeviceRequest(
                        name="gpu", exactly=V1ExactDeviceRequest(device_class_name="gpu-physical")
                    )
                ],
                config=[
                    V1DeviceClaimConfiguration(
                        requests=["gpu"],
                        opaque=V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=parameters),
                    )
                ],
            )
        ),
    )


@pytest.fixture
def run(kube: KubeClient, control_plane: ControlPlane, namespace: str) -> Iterator[Shown]:
    """Runs a Pod until it has shown what it sees, deletes it and waits until it is gone (its card
    free for the next), and answers its ``key=value`` lines."""
    created: list[str] = []

    def shown(pod: V1Pod) -> dict[str, list[str]]:
        name = name_of(pod)
        created.append(name)
        kube.create(POD, pod, namespace=namespace)
        wait_until(
            lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, name, check=False),
            timeout=90,
            what=f"Pod {name} to run and show what it sees",
        )
        lines: dict[str, list[str]] = {}
        for line in control_plane.kubectl("logs", "-n", namespace, name).splitlines():
            key, sep, value = line.partition("=")
            if sep:
                lines.setdefault(key, []).append(value)
        kube.delete(POD, name, namespace)
        wait_until(partial(pod_gone, kube, namespace, name), timeout=60, what=f"Pod {name} to go")
        return lines

    yield shown
    for name in created:
        if not pod_gone(kube, namespace, name):
            kube.delete(POD, name, namespace)


def _ids_of(components: GpuComponents, claim: str) -> list[str]:
    [record] = [r for r in checkpoint(components.node).values() if r["name"] == claim]
    [device] = record["devices"]
    return list(device["cdiDeviceIDs"][1:])


def test_a_default_container_sees_the_loaders_files_and_resolves_the_graphics_libraries(
    gpu_node: GpuComponents, run: Shown
) -> None:
    seen = run(_glibc(gpu_pod("graphics-default", "gpu", node=gpu_node.node.name, script=SHOW)))

    assert seen["file"] == [VULKAN_ICD, EGL_VENDOR]
    assert sorted(seen["names"]) == [
        '"library_path" : "libEGL_nvidia.so.0"',
        '"library_path": "libGLX_nvidia.so.0"',
    ]
    assert seen["loaded"] == [f"{name} => {LIBRARIES}/{name}" for name in PROBED]
    assert sorted(c.split(" => ")[-1] for c in seen["cache"]) == [
        f"{LIBRARIES}/libEGL_nvidia.so.0",
        f"{LIBRARIES}/libGLX_nvidia.so.0",
    ]
    assert seen["smi"] == ["ran"]


def test_a_claim_gets_exactly_the_capabilities_its_config_asks_for(
    kube: KubeClient, namespace: str, gpu_node: GpuComponents, run: Shown
) -> None:
    node = gpu_node.node.name
    kube.create(RESOURCE_CLAIM, _claim("compute-only", ["compute", "utility"]), namespace=namespace)
    kube.create(RESOURCE_CLAIM, _claim("video-only", ["video"]), namespace=namespace)
    try:
        compute = run(_glibc(claim_pod("compute-only", "compute-only", node=node, script=SHOW)))
        video = run(_glibc(claim_pod("video-only", "video-only", node=node, script=SHOW)))
    finally:
        for claim in ("compute-only", "video-only"):
            kube.delete(RESOURCE_CLAIM, claim, namespace)

    assert "file" not in compute  # no Vulkan ICD, no EGL vendor file
    assert compute["loaded"] == [f"{name} => {LIBRARIES}/{name}" for name in PROBED[:2]]  # no GLX, EGL, NVENC
    assert "cache" not in compute
    assert compute["smi"] == ["ran"]

    assert "file" not in video
    assert video["loaded"] == [f"libnvidia-encode.so.1 => {LIBRARIES}/libnvidia-encode.so.1"]
    assert "smi" not in video  # nvidia-smi is utility's


def test_the_capability_specs_are_what_a_claim_names(
    kube: KubeClient, namespace: str, gpu_node: GpuComponents, run: Shown
) -> None:
    kube.create(RESOURCE_CLAIM, _claim("named", ["utility", "compute"]), namespace=namespace)
    try:
        pod = _glibc(
            claim_pod("named", "named", node=gpu_node.node.name, script="echo shown; exec sleep 3600")
        )
        kube.create(POD, pod, namespace=namespace)
        wait_until(lambda: _prepared(gpu_node, "named"), timeout=90, what="claim named to be prepared")
        assert _ids_of(gpu_node, "named") == [
            "k8s.gpu.deckhouse.io/driver=nvidia-compute",
            "k8s.gpu.deckhouse.io/driver=nvidia-utility",
        ]
        for capability in ("compute", "utility", "graphics", "video"):
            assert (gpu_node.node.cdi_dir / f"k8s.gpu.deckhouse.io-driver_nvidia-{capability}.json").is_file()
    finally:
        kube.delete(POD, "named", namespace)
        wait_until(partial(pod_gone, kube, namespace, "named"), timeout=60, what="Pod named to go")
        kube.delete(RESOURCE_CLAIM, "named", namespace)


def _prepared(components: GpuComponents, claim: str) -> bool:
    return any(
        r["name"] == claim and r["state"] == "PrepareCompleted" for r in checkpoint(components.node).values()
    )
