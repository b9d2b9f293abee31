"""``DeviceStatusData``: who a prepared device is and what its Pods use of it, in its claim's status.

gpu-handler writes one per device it prepared into the claim's ``status.devices[].data`` (the DRA
device status of KEP-4817:
https://kubernetes.io/docs/concepts/resource-management/dynamic-resource-allocation/dra-observability/),
next to the entry's ``Ready`` and ``Healthy`` conditions. The identity is what a consumer of the
device otherwise cannot learn without access to the node: the UUID its processes see (a MIG
device's UUID exists only once the node made it), the card's PCI bus ID, the mdev UUID of a vGPU
and the limits a share is held to. ``usage`` is what :class:`~.deviceusage.DeviceUsage` carried on
its own in earlier releases (``kubectl gpu top`` still reads that shape), left out until the first
attribution pass sampled the device.

The entry's ``data`` is one atomic value for server-side apply, so its single writer (gpu-handler's
status book) always sends it whole. It stays far below the API server's 10 KiB cap: the usage lists
at most :data:`~.deviceusage.MAX_CONTAINERS` containers and every other field is a short name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Int32, Int64
from api.gpu.v1alpha1.deviceusage import MAX_CONTAINERS, ContainerUsage

KIND: Final = "DeviceStatusData"


class ShareLimits(ApiModel):
    """The limits the node holds a share of a whole card to, as it set them up at Prepare."""

    strategy: str = Field(description="TimeSlicing or MPS.")
    share_percent: Int32 = Field(ge=0, le=100, description="The share of the card's compute.")
    memory_mib: Int64 = Field(ge=0, alias="memoryMiB", description="The share's GPU memory.")
    interval: str | None = Field(default=None, description="TimeSlicing: the card's time slice.")


class UsageFigures(ApiModel):
    """What the Pods holding the device used of it at ``sampledAt``."""

    sampled_at: datetime
    memory_used_bytes: Int64 = Field(ge=0, description="GPU memory held by the listed containers.")
    sm_utilization_percent: Int32 | None = Field(default=None, ge=0, le=100)
    containers: list[ContainerUsage] = Field(default_factory=list, max_length=MAX_CONTAINERS)
    containers_omitted: Int32 | None = Field(default=None, ge=1)


class DeviceStatusData(ApiModel):
    """One prepared device: its identity, and its usage once sampled. A field the node does not
    know for this device (a vGPU has no UUID the host sees, a whole card no mdev) is left out."""

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["DeviceStatusData"] = KIND
    device_type: str | None = Field(default=None, description="Physical, MIG, Partition or VGPU.")
    physical_gpu: str | None = Field(default=None, alias="physicalGPU")
    uuid: str | None = Field(default=None, alias="uuid", description="The card's UUID, or the MIG device's.")
    pci_bus_id: str | None = Field(default=None, alias="pciBusID", description="The card's PCI address.")
    mdev_uuid: str | None = Field(default=None, alias="mdevUUID", description="A vGPU's mediated device.")
    share: ShareLimits | None = None
    usage: UsageFigures | None = None
