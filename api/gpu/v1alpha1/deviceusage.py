"""``DeviceUsage``: what the Pods holding one allocated device used of it, as gpu-handler last saw.

gpu-handler writes one per prepared device into the claim's ``status.devices[].data`` (the DRA
device status of KEP-4817, stable in Kubernetes 1.37:
https://kubernetes.io/docs/concepts/resource-management/dynamic-resource-allocation/dra-observability/).
Why there and not only in metrics: a namespace's users can read their own ResourceClaims with the
rights they already have, so ``kubectl gpu top`` works from a laptop without access to the
cluster's monitoring, and a claim's reader sees the usage of *its* device only — a process of
another namespace's Pod on the same shared card is never listed here (it is in the node's
metrics, which only the monitoring stack reads).

The data is small by construction (the API server caps it at 10 KiB): processes are summed per
container, at most :data:`MAX_CONTAINERS` are listed (largest memory first) and the rest counted
in ``containersOmitted``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Int32, Int64

KIND: Final = "DeviceUsage"
MAX_CONTAINERS: Final = 16


class ContainerUsage(ApiModel):
    """One container's processes on the device, summed."""

    namespace: str
    pod: str
    container: str = Field(description="The container's name; empty while its Pod's status does not name it.")
    processes: Int32 = Field(ge=1)
    memory_bytes: Int64 = Field(ge=0, description="GPU memory the container's processes hold.")
    sm_utilization_percent: Int32 | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Share of the device's streaming multiprocessors the processes kept busy over the last "
        "interval, summed; left out where the driver samples no per-process utilization (MIG devices).",
    )


class DeviceUsage(ApiModel):
    """One allocated device's usage at ``sampledAt``."""

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["DeviceUsage"] = KIND
    sampled_at: datetime
    physical_gpu: str = Field(alias="physicalGPU")
    uuid: str = Field(alias="uuid", description="The card's UUID, or the MIG device's.")
    memory_used_bytes: Int64 = Field(ge=0, description="GPU memory held by the listed containers.")
    sm_utilization_percent: Int32 | None = Field(default=None, ge=0, le=100)
    containers: list[ContainerUsage] = Field(default_factory=list, max_length=MAX_CONTAINERS)
    containers_omitted: Int32 | None = Field(default=None, ge=1)
