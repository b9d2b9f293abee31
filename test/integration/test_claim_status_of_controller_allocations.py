"""gpu-handler's device status on a claim that gpu-dra-controller allocated (a Pod bound straight to
a node): a TimeSlicing share whose claim carries our opaque config, created as ``kubectl`` creates
it, allocated through the real :class:`ClaimWriter`, then written by the real status writer.

The allocation copies the claim's opaque parameters into ``status.allocation.devices.config``. The
API server keeps such a RawExtension as the very bytes a request carried, and compares the stored
allocation with the one a later write produces byte by byte; a server-side apply of
``status.devices`` re-encodes the allocation compactly. So an allocation written with insignificant
whitespace (what Python's ``json.dumps`` sends) can never be matched again: every device status
write is refused with 422 ``status.allocation ... field cannot be modified once set``.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import V1AllocationResult

from api.gpu.v1alpha1 import DeviceStatusData
from pkg.devcluster.cluster import ControlPlane
from pkg.domain.names import DRIVER
from pkg.dracontroller.internal.service.claim_writer import ClaimWriter
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.gpuhandler.attribution.claim_status import ClaimStatusWriter
from pkg.gpuhandler.attribution.status_book import DeviceIdentity, DeviceStatusBook
from pkg.gpuhandler.attribution.status_loop import DeviceStatusLoop
from pkg.gpuhandler.preparation.services import DeviceKey

pytestmark = pytest.mark.dra_api

POOL = "gpus/node-a"
SHARE = "0b6c7a3e-5d1f-4c2a-9e8b-3f4a5b6c7d8e"
KEY = DeviceKey(POOL, "gpu-0000-3b-00-0-ts", SHARE)
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
# Keys out of alphabetical order on purpose: a server-side apply re-encodes the stored allocation's
# parameters with sorted keys, so the allocation our client writes must carry them sorted too.
TIME_SLICING = {
    "kind": "GpuConfig",
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "sharing": {"timeSlicing": {"interval": "Long"}, "strategy": "TimeSlicing"},
    "driverCapabilities": ["compute", "utility"],
}


def created_by_kubectl(plane: ControlPlane, kube: KubeClient, namespace: str) -> Any:
    """The share claim of the e2e tier, sent as ``kubectl`` sends it (compact JSON)."""
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "long", "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu-timeslicing",
                            "capacity": {"requests": {"sharePercent": "50"}},
                        },
                    }
                ],
                "config": [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": TIME_SLICING}}],
            }
        },
    }
    plane.kubectl("create", "-f", "-", input_text=json.dumps(manifest))
    return kube.get(RESOURCE_CLAIM, "long", namespace)


def share_allocation() -> V1AllocationResult:
    """What gpu-dra-controller's allocator builds for that claim on node-a: a share with its
    consumed capacity, the claim's config (``FromClaim``) and the node selector."""
    raw = {
        "devices": {
            "results": [
                {
                    "request": "gpu",
                    "driver": DRIVER,
                    "pool": POOL,
                    "device": KEY.device,
                    "shareID": SHARE,
                    "consumedCapacity": {"sharePercent": "50"},
                }
            ],
            "config": [{"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": TIME_SLICING}}],
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
            ]
        },
    }
    return V1AllocationResult.model_validate(raw)


def test_the_device_status_of_a_share_gpu_dra_controller_allocated_is_written(
    kube: KubeClient, control_plane: ControlPlane, namespace: str
) -> None:
    claim = created_by_kubectl(control_plane, kube, namespace)
    written = ClaimWriter(kube, InFlight()).allocate(claim, share_allocation())
    assert written is not None
    assert written.metadata is not None
    allocated = RESOURCE_CLAIM.encode(written)["status"]["allocation"]

    book = DeviceStatusBook(verdicts=dict, now=lambda: T0)
    writer = ClaimStatusWriter(client=kube, pool=POOL, clock=time.monotonic)
    identity = DeviceIdentity(
        key=KEY, card="0000:3b:00.0", data=DeviceStatusData(physical_gpu="node-a-0", uuid="GPU-aaaa")
    )
    book.prepared(namespace=namespace, name="long", uid=str(written.metadata.uid), devices=[identity])
    DeviceStatusLoop(book=book, writer=writer).step()

    assert book.pending() == []  # written, not backing off
    status = RESOURCE_CLAIM.encode(kube.get(RESOURCE_CLAIM, "long", namespace))["status"]
    [ours] = status["devices"]
    assert (ours["driver"], ours["pool"], ours["device"], ours["shareID"]) == (
        DRIVER,
        POOL,
        KEY.device,
        SHARE,
    )
    assert {c["type"]: c["status"] for c in ours["conditions"]} == {"Ready": "True", "Healthy": "Unknown"}
    assert ours["data"]["uuid"] == "GPU-aaaa"
    assert status["allocation"] == allocated  # the apply left the allocation as it was
