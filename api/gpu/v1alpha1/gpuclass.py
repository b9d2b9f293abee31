"""GPUClass: the administrator's long-lived description of a kind of GPU (spec §5).

A GPUClass says which device type is wanted (a whole card or a MIG partition), the minimum
requirements, the sharing policy and where devices may come from. Its controller (a later task)
turns each GPUClass into a DRA DeviceClass and reports the names it generated in ``status``.

Cross-field rules are validators and CEL rules in the CRD, so kubectl and the controller agree on
what a valid GPUClass is:
- ``nvidia.mig.profile`` is required exactly when ``deviceType`` is MIG;
- ``sharing.timeSlicing`` only with strategy TimeSlicing, ``sharing.mps`` only with strategy MPS.
``status.valid``/``status.message`` remain for what only the controller can judge (for example a
profile no card in the cluster offers).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Final, Literal

from kubernetes.client import V1ObjectMeta
from pydantic import Field, model_validator

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Conditions, Int32, Int64, Vendor, cel_rules

KIND: Final = "GPUClass"
PLURAL: Final = "gpuclasses"

# A Kubernetes resource.Quantity in its canonical string form, e.g. "12Gi", "500M", "1.5e3".
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


class DeviceType(StrEnum):
    PHYSICAL = "Physical"
    MIG = "MIG"


class SharingStrategy(StrEnum):
    EXCLUSIVE = "Exclusive"
    TIME_SLICING = "TimeSlicing"
    MPS = "MPS"


class TimeSlicingInterval(StrEnum):
    DEFAULT = "Default"
    SHORT = "Short"
    MEDIUM = "Medium"
    LONG = "Long"


class Requirements(ApiModel):
    min_memory: str | None = Field(
        default=None,
        pattern=QUANTITY_PATTERN,
        description='Minimum device memory as a quantity, e.g. "12Gi".',
    )
    min_compute_capability: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+$",
        description='Minimum CUDA compute capability as "<major>.<minor>", e.g. "8.0".',
    )


class MigClass(ApiModel):
    profile: str = Field(min_length=1, description='MIG profile name, e.g. "2g.12gb".')


class NvidiaClass(ApiModel):
    mig: MigClass | None = Field(default=None, description="MIG settings; required when deviceType is MIG.")


class TimeSlicing(ApiModel):
    interval: TimeSlicingInterval = Field(
        default=TimeSlicingInterval.DEFAULT, description="Time slice length of the CUDA scheduler."
    )


class Mps(ApiModel):
    default_active_thread_percentage: Int32 | None = Field(
        default=None, ge=1, le=100, description="Default share of the card's threads per MPS client, 1-100."
    )


class Sharing(ApiModel):
    model_config = cel_rules(
        (
            "!has(self.timeSlicing) || self.strategy == 'TimeSlicing'",
            "timeSlicing requires strategy TimeSlicing",
        ),
        ("!has(self.mps) || self.strategy == 'MPS'", "mps requires strategy MPS"),
    )

    strategy: SharingStrategy = Field(
        default=SharingStrategy.EXCLUSIVE,
        description="How a device is shared: Exclusive, TimeSlicing or MPS. The share is requested "
        "in the ResourceClaim through capacity.requests.sharePercent.",
    )
    time_slicing: TimeSlicing | None = Field(
        default=None, description="Settings of the TimeSlicing strategy."
    )
    mps: Mps | None = Field(default=None, description="Settings of the MPS strategy.")

    @model_validator(mode="after")
    def _settings_match_strategy(self) -> Sharing:
        if self.time_slicing is not None and self.strategy is not SharingStrategy.TIME_SLICING:
            raise ValueError(f"sharing.timeSlicing requires strategy TimeSlicing, not {self.strategy.value}")
        if self.mps is not None and self.strategy is not SharingStrategy.MPS:
            raise ValueError(f"sharing.mps requires strategy MPS, not {self.strategy.value}")
        return self


class Selector(ApiModel):
    match_labels: dict[str, str] | None = Field(
        default=None, description="Labels a PhysicalGPU must have for its devices to belong to the class."
    )


class GPUClassSpec(ApiModel):
    model_config = cel_rules(
        (
            "self.deviceType == 'MIG' ? (has(self.nvidia) && has(self.nvidia.mig))"
            " : !(has(self.nvidia) && has(self.nvidia.mig))",
            "nvidia.mig.profile is required when deviceType is MIG and forbidden otherwise",
        ),
    )

    vendor: Vendor = Field(description="GPU vendor.")
    device_type: DeviceType = Field(description="Physical (a whole card) or MIG (a MIG partition).")
    requirements: Requirements | None = Field(default=None, description="Minimum device requirements.")
    nvidia: NvidiaClass | None = Field(default=None, description="NVIDIA-specific settings.")
    sharing: Sharing | None = Field(default=None, description="Sharing policy; Exclusive when absent.")
    selector: Selector | None = Field(default=None, description="Which PhysicalGPUs may provide devices.")
    names: list[str] | None = Field(
        default=None, description="If set, only the PhysicalGPUs with these names may provide devices."
    )

    @model_validator(mode="after")
    def _mig_profile_iff_mig(self) -> GPUClassSpec:
        has_profile = self.nvidia is not None and self.nvidia.mig is not None
        if self.device_type is DeviceType.MIG and not has_profile:
            raise ValueError("spec.nvidia.mig.profile is required when spec.deviceType is MIG")
        if self.device_type is not DeviceType.MIG and has_profile:
            raise ValueError(
                f"spec.nvidia.mig is allowed only when spec.deviceType is MIG, not {self.device_type.value}"
            )
        return self


class Generated(ApiModel):
    device_class_name: str | None = Field(default=None, description="Name of the generated DeviceClass.")
    extended_resource_name: str | None = Field(
        default=None,
        description="Extended resource name of the generated DeviceClass, gpu.deckhouse.io/<name>.",
    )


class GPUClassStatus(ApiModel):
    valid: bool | None = Field(
        default=None, description="Whether the class could be turned into a DeviceClass."
    )
    message: str | None = Field(default=None, description="Why the class is invalid, or a summary.")
    generated: Generated | None = Field(default=None, description="Objects generated from the class.")
    conditions: Conditions | None = Field(default=None, description="Conditions of the class.")
    observed_generation: Int64 | None = Field(
        default=None, ge=0, description="metadata.generation the controller last processed."
    )


class GPUClass(ApiModel):
    """A class of GPU devices (cluster-scoped)."""

    KIND: ClassVar[str] = KIND
    PLURAL: ClassVar[str] = PLURAL

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion", description="API version of the object."
    )
    kind: Literal["GPUClass"] = Field(default="GPUClass", description="Kind of the object.")
    metadata: V1ObjectMeta = Field(default_factory=V1ObjectMeta, description="Standard object metadata.")
    spec: GPUClassSpec = Field(description="What the class selects and how its devices are shared.")
    status: GPUClassStatus | None = Field(default=None, description="State reported by the controller.")
