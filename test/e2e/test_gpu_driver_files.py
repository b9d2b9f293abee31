"""A GPU container gets the driver's user space from our CDI specs alone, on the real node.

The node's stand-in driver (real shared objects named as driver 580 names them, a stand-in
``nvidia-smi``; :mod:`pkg.devcluster.driverroot`) sits in a folder of its own, as on a node whose
driver lives under ``/usr/local/nvidia``. gpu-handler writes the base CDI spec from it and puts
NVIDIA's CDI hook on the node; containerd applies the claim's spec and the base spec, and runc runs
the hook. The container runs a glibc image whose own ld cache knows nothing of any driver: it must
find the libraries at the expected path, its dynamic loader must resolve ``libcuda.so.1`` as a CUDA
program's does (a program that ``dlopen``s it, and ``ldconfig -p``), ``nvidia-smi`` must run, and
OpenCL's ICD file, which that folder lacks as the H200 node's does, must name the library — for a
whole card, a MIG device and an MPS share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial

import pytest
from kubernetes.client import V1Pod
from testutil.e2e.gpu_nodes import checkpoint, claim_pod, gpu_pod, pod_gone, run_and_show, shared_claim
from testutil.k8s_fields import name_of, spec_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.driverroot import SMI_OUTPUT
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.images import GLIBC_IMAGE, LOAD_PROBE
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

A30_SECOND = "0000:d8:00.0"
LIBRARIES = "/usr/local/nvidia/lib64"
SHOW_DRIVER = (
    f"echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; ls {LIBRARIES} | sed 's/^/lib=/'; "
    f"{LOAD_PROBE} libcuda.so.1 | sed 's/^/loaded=/'; {LOAD_PROBE} libnvidia-ml.so.1 | sed 's/^/loaded=/'; "
    "ldconfig -p | grep -F 'libcuda.so.1 ' | sed 's/^[[:space:]]*/cache=/'; "
    "nvidia-smi | sed 's/^/smi=/'; ls /usr/bin/nvidia-cuda-mps-control | sed 's/^/tool=/'; "
    "sed 's/^/opencl=/' /etc/OpenCL/vendors/nvidia.icd; "
    "echo shown; exec sleep 3600"
)


def _glibc(pod: V1Pod) -> V1Pod:
    spec_of(pod).containers[0].image = GLIBC_IMAGE
    return pod


def _seen(plane: ControlPlane, namespace: str, pod: V1Pod) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    for line in plane.kubectl("logs", "-n", namespace, name_of(pod)).splitlines():
        key, sep, value = line.partition("=")
        if sep:
            lines.setdefault(key, []).append(value)
    return lines


def _assert_driver_files(seen: dict[str, list[str]], version: str) -> None:
    assert f"libcuda.so.{version}" in seen["lib"]
    assert "libcuda.so.1" in seen["lib"]  # the soname link the hook made
    assert f"libnvidia-ml.so.{version}" in seen["lib"]
    assert seen["loaded"] == [
        f"libcuda.so.1 => {LIBRARIES}/libcuda.so.1",
        f"libnvidia-ml.so.1 => {LIBRARIES}/libnvidia-ml.so.1",
    ]
    [cached] = seen["cache"]
    assert cached.endswith(f"=> {LIBRARIES}/libcuda.so.1")
    assert seen["smi"][0] == SMI_OUTPUT.format(version=version)
    assert seen["tool"] == ["/usr/bin/nvidia-cuda-mps-control"]
    # The driver folder has libnvidia-opencl but no ICD file: gpu-handler wrote the one line.
    assert seen["opencl"] == ["libnvidia-opencl.so.1"]


@pytest.fixture
def pods(kube: KubeClient, namespace: str) -> Iterator[list[V1Pod]]:
    """Pods to delete after the test, waiting until they are gone (their claims unprepared)."""
    created: list[V1Pod] = []
    yield created
    for pod in created:
        kube.delete(POD, name_of(pod), namespace)
    for pod in created:
        name = name_of(pod)
        wait_until(partial(pod_gone, kube, namespace, name), timeout=60, what=f"Pod {name} to go")


def test_whole_card_and_mig_containers_load_libcuda_and_run_nvidia_smi(
    kube: KubeClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_node: GpuComponents,
    pods: list[V1Pod],
) -> None:
    node = gpu_node.node
    version = gpu_node.driver_root.version
    for name, resource in (("whole-driver", "gpu"), ("mig-driver", "mig-1g")):
        pod = _glibc(gpu_pod(name, resource, node=node.name, script=SHOW_DRIVER))
        pods.append(pod)
        run_and_show(kube, control_plane, namespace, pod)
        seen = _seen(control_plane, namespace, pod)
        _assert_driver_files(seen, version)
        assert seen["NVIDIA_VISIBLE_DEVICES"][0].startswith("MIG-" if resource.startswith("mig") else "GPU-")

    base = json.loads((node.cdi_dir / "k8s.gpu.deckhouse.io-driver_nvidia.json").read_text())
    hook = base["containerEdits"]["hooks"][0]["path"]
    assert hook.startswith(str(node.kubelet.paths.root / "plugins" / "gpu.deckhouse.io" / "bin"))
    ids = [d["cdiDeviceIDs"] for record in checkpoint(node).values() for d in record["devices"]]
    assert all(device_ids[-1] == "k8s.gpu.deckhouse.io/driver=nvidia" for device_ids in ids)


def test_an_mps_share_container_gets_the_driver_files_and_the_daemons_pipe(
    kube: KubeClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_node: GpuComponents,
    pods: list[V1Pod],
) -> None:
    claim = shared_claim("mps-driver", "gpu-mps", share_percent=50, card=A30_SECOND)
    kube.create(RESOURCE_CLAIM, claim, namespace=namespace)
    script = SHOW_DRIVER.replace("echo shown", "echo pipe=$CUDA_MPS_PIPE_DIRECTORY; echo shown")
    pod = _glibc(claim_pod("mps-driver", "mps-driver", node=gpu_node.node.name, script=script))
    pods.append(pod)
    run_and_show(kube, control_plane, namespace, pod)

    seen = _seen(control_plane, namespace, pod)
    _assert_driver_files(seen, gpu_node.driver_root.version)
    assert seen["pipe"] == ["/tmp/nvidia-mps"]
