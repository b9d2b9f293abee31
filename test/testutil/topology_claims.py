"""The claims docs/topology.md shows, as model objects the topology tests submit.

* :func:`gpu_with_nic`: one whole GPU and one NIC under the same PCIe root
  (``matchAttribute: resource.kubernetes.io/pcieRoot`` across two drivers);
* :func:`gpus_in_one_nvlink_domain`: ``count`` whole GPUs that share an NVLink domain
  (``matchAttribute: gpu.deckhouse.io/nvlinkDomain``).

``whole_gpu_class`` is the DeviceClass of exclusive whole cards the requests name; :func:`claim` and
:func:`request` build others.
"""

from __future__ import annotations

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1DeviceClaim,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceConstraint,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1ResourceClaimSpec,
)

GPU_DRIVER = "gpu.deckhouse.io"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NVLINK_DOMAIN = "gpu.deckhouse.io/nvlinkDomain"


def whole_gpu_class(name: str = "gpu-whole", *, guard: str = "") -> V1DeviceClass:
    """Exclusive whole cards; ``guard`` (a CEL condition) narrows it, e.g. to one test's nodes."""
    a = f'device.attributes["{GPU_DRIVER}"]'
    expression = f'device.driver == "{GPU_DRIVER}" && {a}.deviceType == "Physical"'
    expression += f' && {a}.sharingStrategy == "Exclusive"'
    if guard:
        expression += f" && {guard}"
    return V1DeviceClass(
        metadata=V1ObjectMeta(name=name),
        spec=V1DeviceClassSpec(selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=expression))]),
    )


def request(name: str, device_class: str, count: int = 1, *, selector: str | None = None) -> V1DeviceRequest:
    """``count`` devices of ``device_class``; ``selector`` (CEL) narrows them further."""
    selectors = [V1DeviceSelector(cel=V1CELDeviceSelector(expression=selector))] if selector else None
    return V1DeviceRequest(
        name=name,
        exactly=V1ExactDeviceRequest(
            device_class_name=device_class, allocation_mode="ExactCount", count=count, selectors=selectors
        ),
    )


def claim(
    name: str, namespace: str, requests: list[V1DeviceRequest], constraints: list[V1DeviceConstraint]
) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        api_version="resource.k8s.io/v1",
        kind="ResourceClaim",
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1ResourceClaimSpec(devices=V1DeviceClaim(requests=requests, constraints=constraints)),
    )


def gpu_with_nic(
    name: str, namespace: str, *, gpu_class: str = "gpu-whole", nic_class: str = "nic"
) -> ResourceV1ResourceClaim:
    return claim(
        name,
        namespace,
        [request("gpu", gpu_class), request("nic", nic_class)],
        [V1DeviceConstraint(requests=["gpu", "nic"], match_attribute=PCIE_ROOT)],
    )


def gpus_in_one_nvlink_domain(
    name: str, namespace: str, *, count: int = 2, gpu_class: str = "gpu-whole"
) -> ResourceV1ResourceClaim:
    return claim(
        name,
        namespace,
        [request("gpus", gpu_class, count)],
        [V1DeviceConstraint(requests=["gpus"], match_attribute=NVLINK_DOMAIN)],
    )
