"""PhysicalGPU: the inventory object of one physical card.

A PhysicalGPU appears and disappears with its PCI device. It is cluster-scoped and has no desired
state (``spec: {}``, docs/architecture.md#physicalgpu-has-no-desired-state): the mode of a card follows from
what is allocated on it and is switched on the node during NodePrepareResources. Everything lives in
``status``, written by the node components; ``observedGeneration`` is the generation our reconciler last
processed.

The structural filling rules (docs/architecture.md#a-field-without-a-source-is-left-out) are validators (and
CEL rules in the CRD):
- ``capabilities.nvidia`` only when ``capabilities.vendor`` is Nvidia;
- ``capabilities.nvidia.mig`` absent when ``migSupported`` is false;
- ``currentState.nvidia`` only when ``currentState.driverType`` is Nvidia;
- ``currentState.nvidia.mig`` only when the capabilities, if present, say ``migSupported``.
Rules about *when* a source may be read (for example "capabilities only while DriverReady=True")
depend on history, not on the object's shape; the writers enforce them, not the schema.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Final, Literal

from kubernetes.client import V1ObjectMeta
from pydantic import Field, model_validator

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Conditions, Int32, Int64, cel_rules
from api.gpu.v1alpha1.hardware import Capabilities, NodeInfo, PciInfo

KIND: Final = "PhysicalGPU"
PLURAL: Final = "physicalgpus"

LABEL_NODE: Final = "gpu.deckhouse.io/node"
LABEL_VENDOR: Final = "gpu.deckhouse.io/vendor"
LABEL_DEVICE: Final = "gpu.deckhouse.io/device"


class PhysicalGPUConditionType(StrEnum):
    """Condition types of ``PhysicalGPU.status.conditions``: ``DriverReady`` (gpu-controller, from the
    validator), ``HardwareHealthy`` (gpu-handler's verdict, seeded by gpu-controller) and
    ``ComputeDomainsReady`` (gpu-handler, only on a card in a multi-node NVLink fabric: whether
    the node offers IMEX channels to compute domains, and why not)."""

    DRIVER_READY = "DriverReady"
    HARDWARE_HEALTHY = "HardwareHealthy"
    COMPUTE_DOMAINS_READY = "ComputeDomainsReady"


class DriverType(StrEnum):
    """Kernel driver bound to the PCI function, as sysfs shows it (it may appear before DriverReady).

    ``nvidia`` is Nvidia, ``vfio-pci`` is VFIO, ``amdgpu`` is ROCm; any other bound driver (nouveau,
    i915, xe, ...) is Unknown, and with no driver bound the field is absent. The spec leaves the list
    open ("and so on"); a closed enum with Unknown lets the API server reject typos while an
    unexpected binding stays visible. New drivers are added as values, which is compatible."""

    NVIDIA = "Nvidia"
    VFIO = "VFIO"
    ROCM = "ROCm"
    UNKNOWN = "Unknown"


class MigMode(StrEnum):
    ENABLED = "Enabled"
    DISABLED = "Disabled"
    NOT_AVAILABLE = "NotAvailable"
    UNKNOWN = "Unknown"


class NvidiaMigState(ApiModel):
    mode: MigMode = Field(description="Current MIG mode of the card as NVML reports it.")


class FabricState(StrEnum):
    """Where a card stands in its multi-node NVLink fabric, as our offers act on it: ``Joining``
    (NVML's fabric state not started or in progress), ``Ready`` (joined, healthy), ``Degraded``
    (joined, the health mask reports a fault), ``Failed`` (joining ended with an error). A card of
    no such fabric has no ``fabric`` block."""

    JOINING = "Joining"
    READY = "Ready"
    DEGRADED = "Degraded"
    FAILED = "Failed"


class NvidiaFabric(ApiModel):
    """The card's NVLink fabric (``nvmlDeviceGetGpuFabricInfoV``); offers of a card not ``Ready``
    carry a ``NoSchedule`` device taint (docs/topology.md#multi-node-nvlink-fabric)."""

    state: FabricState = Field(description="Joining, Ready, Degraded or Failed.")
    cluster_uuid: str | None = Field(
        default=None,
        alias="clusterUUID",
        pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
        description="The fabric's cluster UUID; absent when NVML reports all zeros (no multi-node fabric).",
    )
    clique_id: Int64 | None = Field(
        default=None,
        alias="cliqueID",
        ge=0,
        le=4294967295,
        description="The clique within the cluster: cards of one clique reach each other over NVLink.",
    )
    reasons: list[Annotated[str, Field(max_length=63)]] | None = Field(
        default=None,
        max_length=16,
        description="Why the state is not Ready: RegistrationNotStarted, RegistrationInProgress, "
        "RegistrationFailed<NVML error>, or the health mask's faults (DegradedBandwidth, RouteRecovery, "
        "RouteUnhealthy, AccessTimeoutRecovery, Configuration<fault>).",
    )


class NvidiaState(ApiModel):
    gpu_uuid: str | None = Field(
        default=None, alias="gpuUUID", max_length=96, description='GPU UUID, e.g. "GPU-...".'
    )
    driver_version: str | None = Field(
        default=None, max_length=80, description='NVIDIA driver version, e.g. "580.76.05".'
    )
    cuda_version: str | None = Field(
        default=None, max_length=32, description='CUDA version the driver supports, e.g. "13.0".'
    )
    power_limit_current_w: Int32 | None = Field(
        default=None, alias="powerLimitCurrentW", ge=0, description="Current power limit in watts."
    )
    power_limit_enforced_w: Int32 | None = Field(
        default=None, alias="powerLimitEnforcedW", ge=0, description="Enforced power limit in watts."
    )
    mig: NvidiaMigState | None = Field(
        default=None, description="MIG state; present only when the card supports MIG and the mode is read."
    )
    fabric: NvidiaFabric | None = Field(
        default=None,
        description="Multi-node NVLink fabric of the card; present only when NVML reports the card in one "
        "(or joining one).",
    )


class AmdState(ApiModel):
    """The partition modes an AMD card is in now (``current_compute_partition``,
    ``current_memory_partition`` in sysfs), lower case as the offers name them; they change when a
    claim for a partition of another mode is prepared on a free card."""

    compute_partition_mode: str | None = Field(
        default=None, max_length=16, pattern=r"^[a-z0-9]+$", description='Compute partition mode, e.g. "spx".'
    )
    memory_partition_mode: str | None = Field(
        default=None, max_length=16, pattern=r"^[a-z0-9]+$", description='Memory partition mode, e.g. "nps1".'
    )


class CurrentState(ApiModel):
    model_config = cel_rules(
        (
            "!has(self.nvidia) || (has(self.driverType) && self.driverType == 'Nvidia')",
            "nvidia is allowed only when driverType is Nvidia",
        ),
        (
            "!has(self.amd) || (has(self.driverType) && self.driverType == 'ROCm')",
            "amd is allowed only when driverType is ROCm",
        ),
    )

    driver_type: DriverType | None = Field(
        default=None,
        description="Kernel driver bound to the card, from sysfs (Nvidia, VFIO, ROCm or Unknown); "
        "absent when no driver is bound.",
    )
    nvidia: NvidiaState | None = Field(
        default=None,
        description="NVIDIA driver state; present only when driverType is Nvidia and DriverReady is True.",
    )
    amd: AmdState | None = Field(
        default=None,
        description="AMD card state; present only when driverType is ROCm (amdgpu) and DriverReady is True.",
    )

    @model_validator(mode="after")
    def _nvidia_only_for_nvidia_driver(self) -> CurrentState:
        if self.nvidia is not None and self.driver_type is not DriverType.NVIDIA:
            found = self.driver_type.value if self.driver_type else "absent"
            raise ValueError(
                f"currentState.nvidia is allowed only when currentState.driverType is Nvidia, not {found}"
            )
        if self.amd is not None and self.driver_type is not DriverType.ROCM:
            found = self.driver_type.value if self.driver_type else "absent"
            raise ValueError(
                f"currentState.amd is allowed only when currentState.driverType is ROCm, not {found}"
            )
        return self


class PhysicalGPUSpec(ApiModel):
    """Empty on purpose: a PhysicalGPU has no desired state: the card's mode follows from its allocations."""


class PhysicalGPUStatus(ApiModel):
    model_config = cel_rules(
        (
            "!has(self.currentState) || !has(self.currentState.nvidia) || !has(self.currentState.nvidia.mig)"
            " || !has(self.capabilities)"
            " || (has(self.capabilities.nvidia) && self.capabilities.nvidia.migSupported)",
            "currentState.nvidia.mig is allowed only when capabilities.nvidia.migSupported is true",
        ),
    )

    node_info: NodeInfo | None = Field(default=None, description="Node the card is installed in.")
    pci_info: PciInfo | None = Field(
        default=None, description="PCI identity of the card, from sysfs and pci.ids."
    )
    capabilities: Capabilities | None = Field(
        default=None, description="Capability snapshot; written while DriverReady is True."
    )
    conditions: Conditions | None = Field(
        default=None,
        description="DriverReady and HardwareHealthy, set by the validator; Unknown until it reports.",
    )
    current_state: CurrentState | None = Field(
        default=None, description="State of the driver bound to the card."
    )
    observed_generation: Int64 | None = Field(
        default=None, ge=0, description="metadata.generation the controller last processed."
    )

    @model_validator(mode="after")
    def _mig_state_only_when_supported(self) -> PhysicalGPUStatus:
        state = self.current_state
        if state is None or state.nvidia is None or state.nvidia.mig is None or self.capabilities is None:
            return self
        nvidia = self.capabilities.nvidia
        if nvidia is None or not nvidia.mig_supported:
            raise ValueError(
                "currentState.nvidia.mig is allowed only when capabilities.nvidia.migSupported is true"
            )
        return self


class PhysicalGPU(ApiModel):
    """One physical GPU of the cluster (cluster-scoped)."""

    KIND: ClassVar[str] = KIND
    PLURAL: ClassVar[str] = PLURAL

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion", description="API version of the object."
    )
    kind: Literal["PhysicalGPU"] = Field(default="PhysicalGPU", description="Kind of the object.")
    metadata: V1ObjectMeta = Field(default_factory=V1ObjectMeta, description="Standard object metadata.")
    spec: PhysicalGPUSpec = Field(
        default_factory=PhysicalGPUSpec, description="Always empty: a PhysicalGPU has no desired state."
    )
    status: PhysicalGPUStatus | None = Field(default=None, description="Observed state of the card.")
