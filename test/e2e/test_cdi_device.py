"""A device reaches a container through the whole DRA path, on the real node.

The real kube-scheduler allocates a device of a test driver from a ResourceSlice; the real kubelet
finds the driver's plugin (our ``pkg.framework.kubeletplugin`` server, here with a stand-in driver that
answers with a fixed CDI device) over its registration socket and calls NodePrepareResources;
containerd applies the CDI spec the test wrote, so the container sees the spec's environment and a
character device from the simulated GPU host that it can write to (the device cgroup allows it).
Deleting the Pod makes the kubelet call NodeUnprepareResources. gpu-handler's own plugin is
tested the same way once it prepares real offers.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence

import pytest
from kubernetes.client import (
    CoreV1ResourceClaim,
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1Device,
    V1DeviceClaim,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1PodResourceClaim,
    V1ResourceClaimSpec,
    V1ResourcePool,
    V1ResourceRequirements,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from testutil.e2e.pods import logs, run_to_completion, shell_pod
from testutil.k8s_fields import spec_of, status_of, uid_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.node import RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.kubeletplugin.types import (
    ClaimRef,
    HealthBoard,
    PluginIdentity,
    PreparedDevice,
    PrepareOutcome,
)

DRIVER = "e2e.gpucp.test"
CDI_KIND = "gpucp.test/gpu"


class FixedDeviceDriver:
    """Prepares every claim as the one device of the test pool; remembers the calls."""

    def __init__(self, pool: str) -> None:
        self.pool = pool
        self.prepared: list[ClaimRef] = []
        self.unprepared: list[ClaimRef] = []
        self._lock = threading.Lock()

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        with self._lock:
            self.prepared += claims
        device = PreparedDevice(pool=self.pool, device="dev-0", cdi_device_ids=(f"{CDI_KIND}=dev-0",))
        return {c.uid: PrepareOutcome(devices=(device,)) for c in claims}

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        with self._lock:
            self.unprepared += claims
        return {c.uid: "" for c in claims}


@pytest.fixture
def test_driver(kube: KubeClient, real_node: RealNode, unique: str) -> Iterator[FixedDeviceDriver]:
    """The test driver's plugin registered with the node's kubelet, its pool and its class."""
    pool = f"e2e-{real_node.name}"
    driver = FixedDeviceDriver(pool)
    spec = {
        "cdiVersion": "0.6.0",
        "kind": CDI_KIND,
        "devices": [
            {
                "name": "dev-0",
                "containerEdits": {
                    "env": ["E2E_DEVICE=dev-0"],
                    "deviceNodes": [
                        {"path": "/dev/nvidia0", "hostPath": str(real_node.host.dev / "nvidia0")}
                    ],
                },
            }
        ],
    }
    cdi_file = real_node.cdi_dir / f"e2e-{unique}.json"
    cdi_file.write_text(json.dumps(spec))
    plugin = KubeletPlugin(
        identity=PluginIdentity(driver=DRIVER, instance=str(uuid.uuid4())),
        kubelet_root=real_node.kubelet.paths.root,
        driver=driver,
        health=HealthBoard(),
    )
    plugin.start()
    slice_name = f"e2e-{unique}"
    kube.create(
        RESOURCE_SLICE,
        V1ResourceSlice(
            metadata=V1ObjectMeta(name=slice_name),
            spec=V1ResourceSliceSpec(
                driver=DRIVER,
                node_name=real_node.name,
                pool=V1ResourcePool(name=pool, generation=1, resource_slice_count=1),
                devices=[V1Device(name="dev-0")],
            ),
        ),
    )
    kube.create(
        DEVICE_CLASS,
        V1DeviceClass(
            metadata=V1ObjectMeta(name=f"e2e-{unique}"),
            spec=V1DeviceClassSpec(
                selectors=[
                    V1DeviceSelector(cel=V1CELDeviceSelector(expression=f'device.driver == "{DRIVER}"'))
                ]
            ),
        ),
    )
    try:
        assert plugin.registration.registered.wait(30), (
            f"the kubelet did not register: {plugin.registration.last_error}"
        )
        yield driver
    finally:
        plugin.stop()
        kube.delete(DEVICE_CLASS, f"e2e-{unique}")
        kube.delete(RESOURCE_SLICE, slice_name)
        cdi_file.unlink()


def test_a_container_gets_the_prepared_cdi_device(
    kube: KubeClient,
    control_plane: ControlPlane,
    namespace: str,
    unique: str,
    real_node: RealNode,
    test_driver: FixedDeviceDriver,
) -> None:
    kube.create(
        RESOURCE_CLAIM,
        ResourceV1ResourceClaim(
            metadata=V1ObjectMeta(name="device"),
            spec=V1ResourceClaimSpec(
                devices=V1DeviceClaim(
                    requests=[
                        V1DeviceRequest(
                            name="dev", exactly=V1ExactDeviceRequest(device_class_name=f"e2e-{unique}")
                        )
                    ]
                )
            ),
        ),
        namespace=namespace,
    )
    script = "echo env=$E2E_DEVICE; ls -l /dev/nvidia0; echo x > /dev/nvidia0 && echo written"
    pod = shell_pod(
        "with-device",
        script,
        node=real_node.name,
        resource_claims=[V1PodResourceClaim(name="dev", resource_claim_name="device")],
    )
    spec_of(pod).containers[0].resources = V1ResourceRequirements(claims=[CoreV1ResourceClaim(name="dev")])

    pod = run_to_completion(kube, namespace, pod)

    assert status_of(pod).phase == "Succeeded", pod.status
    out = logs(control_plane, namespace, "with-device").splitlines()
    assert out[0] == "env=dev-0"
    assert out[1].startswith("crw-"), out[1]  # a character device, not a file the shell made
    assert " 1,   3 " in out[1], out[1]  # the host node's numbers
    assert out[2] == "written"
    claim = kube.get(RESOURCE_CLAIM, "device", namespace)
    assert [c.uid for c in test_driver.prepared] == [uid_of(claim)]

    kube.delete(POD, "with-device", namespace)
    wait_until(
        lambda: [c.uid for c in test_driver.unprepared] == [uid_of(claim)],
        timeout=60,
        what="the kubelet to unprepare the claim",
    )
