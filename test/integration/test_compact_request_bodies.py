"""A claim our client creates with opaque parameters stays writable by every later JSON write.

The API server keeps a RawExtension (here the claim's opaque ``parameters``) as the bytes it was
sent and compares them byte for byte on each update, after re-encoding the object compactly. A
claim created with ``json.dumps``' default separators can therefore never be patched again ("spec:
field is immutable"); ``pkg.framework.client.compact_body`` sends compact JSON so ours can. The
server-side half is shown too, through a raw request with spaced bytes, so the test proves the
reason and not only our side of it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClaim,
    V1DeviceClaimConfiguration,
    V1DeviceRequest,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1ResourceClaimSpec,
)

from pkg.domain.names import DRIVER
from pkg.framework.client import InvalidError, KubeClient, PatchType
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM

pytestmark = pytest.mark.dra_api

# Keys out of alphabetical order on purpose: the server re-encodes a RawExtension with sorted keys.
PARAMETERS = {
    "kind": "GpuConfig",
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "sharing": {"timeSlicing": {"interval": "Long"}, "strategy": "TimeSlicing"},
    "driverCapabilities": ["compute", "utility"],
}


def claim(name: str, namespace: str) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=[V1DeviceRequest(name="gpu", exactly=V1ExactDeviceRequest(device_class_name="gpu"))],
                config=[
                    V1DeviceClaimConfiguration(
                        requests=["gpu"],
                        opaque=V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=PARAMETERS),
                    )
                ],
            )
        ),
    )


def annotate(kube: KubeClient, name: str, namespace: str) -> Any:
    patch = [{"op": "add", "path": "/metadata/annotations", "value": {"gpu.deckhouse.io/seen": "yes"}}]
    return kube.patch(RESOURCE_CLAIM, name, patch, patch_type=PatchType.JSON, namespace=namespace)


def test_a_claim_our_client_created_with_opaque_parameters_can_be_patched(
    kube: KubeClient, namespace: str
) -> None:
    kube.create(RESOURCE_CLAIM, claim("ours", namespace))
    patched = annotate(kube, "ours", namespace)
    assert (patched.metadata.annotations or {})["gpu.deckhouse.io/seen"] == "yes"


def test_the_same_claim_sent_with_spaces_cannot_be_patched_again(kube: KubeClient, namespace: str) -> None:
    body = RESOURCE_CLAIM.encode(claim("spaced", namespace))
    spaced = json.dumps(body)  # what the official client sends: ", " and ": "
    assert ": " in spaced
    kube.raw("POST", RESOURCE_CLAIM.collection_path(namespace), body=spaced)
    with pytest.raises(InvalidError, match="immutable"):
        annotate(kube, "spaced", namespace)
