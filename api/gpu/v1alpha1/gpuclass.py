"""GPUClass: the administrator's long-lived description of a kind of GPU, which gpu-controller turns into a
DeviceClass (docs/architecture.md#gpuclass-to-deviceclass).

A GPUClass says which device type is wanted (a whole card or a MIG partition), the minimum
requirements, the sharing policy and where devices may come from. gpu-controller turns each
GPUClass into a DRA DeviceClass of the same name (``pkg/gpucontroller/gpuclass``) and reports the
names it generated in ``status``.

Cross-field rules are validators and CEL rules in the CRD, so kubectl and the controller agree on
what a valid GPUClass is (an object the model refused would be invisible to the controller, which
skips what it cannot parse):
- ``nvidia.mig.profile`` is required exactly when ``deviceType`` is MIG, and ``nvidia`` only with
  vendor Nvidia;
- ``sharing.timeSlicing`` only with strategy TimeSlicing, ``sharing.mps`` only with strategy MPS;
- TimeSlicing and MPS share a whole card: they need ``deviceType: Physical`` (the shared
  offers are offers of a card, never of a MIG partition: docs/architecture.md#offers-and-the-mode-invariant);
- ``selector.matchLabels`` may name only the PhysicalGPU labels that have a device attribute
  (``gpu.deckhouse.io/vendor``, ``gpu.deckhouse.io/device``): the DeviceClass selects devices, and a
  CEL expression sees a device's attributes, never its PhysicalGPU's labels or its node.
``status.valid``/``status.message`` remain for what only the controller can judge: a DeviceClass of
the same name that the class does not own, a default extended resource name that is too long, a
DeviceClass the API server refused.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Final, Literal

from kubernetes.client import V1ObjectMeta
from pydantic import Field, model_validator

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Conditions, Int32, Int64, Vendor, cel_rules
from api.gpu.v1alpha1.physicalgpu import LABEL_DEVICE, LABEL_VENDOR

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
    PARTITION = "Partition"  # one compute partition of a card switched to a card-wide partition mode
    VGPU = "VGPU"  # a mediated device of a card in vGPU mode, for a VM (docs/vgpu.md)


class SharingStrategy(StrEnum):
    EXCLUSIVE = "Exclusive"
    TIME_SLICING = "TimeSlicing"
    MPS = "MPS"


class DriverCapability(StrEnum):
    """A part of NVIDIA's driver user space a container gets, named as NVIDIA names its driver
    capabilities (docs/kubelet-plugin.md#driver-capabilities-per-claim)."""

    COMPUTE = "compute"  # CUDA, PTX JIT, NVVM, the MPS daemon and server
    UTILITY = "utility"  # NVML, nvidia-smi
    GRAPHICS = "graphics"  # OpenGL, EGL, GLX, Vulkan, OptiX
    VIDEO = "video"  # NVENC, NVDEC (NVCUVID), optical flow
    DISPLAY = "display"  # frame buffer capture (NvFBC)


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


MIG_PROFILE_PATTERN: Final = r"^[0-9]+g\.[0-9]+gb([+.-][a-z0-9]+)*$"
LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
OBJECT_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# <DNS subdomain>/<name of at most 63 characters>: the form of an extended resource name.
EXTENDED_RESOURCE_PATTERN: Final = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
SELECTOR_LABELS: Final = (LABEL_VENDOR, LABEL_DEVICE)
"""The PhysicalGPU labels a selector may name: each is also a device attribute of every offer."""
MAX_NAMES: Final = 64

LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=OBJECT_NAME_PATTERN)]


class MigClass(ApiModel):
    profile: str = Field(
        min_length=1,
        max_length=64,
        pattern=MIG_PROFILE_PATTERN,
        description='MIG profile name, e.g. "2g.12gb".',
    )


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
    model_config = cel_rules(
        (
            "!has(self.matchLabels) || self.matchLabels.all(k, k in "
            + "["
            + ", ".join(f"'{label}'" for label in SELECTOR_LABELS)
            + "])",
            "selector.matchLabels may name only "
            + " and ".join(SELECTOR_LABELS)
            + ", the PhysicalGPU labels that are also device attributes",
        ),
    )

    match_labels: dict[str, LabelValue] | None = Field(
        default=None,
        max_length=len(SELECTOR_LABELS),
        description="Labels a PhysicalGPU must have for its devices to belong to the class: "
        + " and ".join(SELECTOR_LABELS)
        + ", which the DeviceClass checks as the device attributes vendor and device.",
    )

    @model_validator(mode="after")
    def _only_attribute_labels(self) -> Selector:
        unknown = sorted(set(self.match_labels or {}) - set(SELECTOR_LABELS))
        if unknown:
            raise ValueError(
                f"selector.matchLabels may name only {' and '.join(SELECTOR_LABELS)} (the PhysicalGPU "
                f"labels that are also device attributes), not {', '.join(unknown)}; use spec.names "
                "for particular cards"
            )
        return self


class GPUClassSpec(ApiModel):
    model_config = cel_rules(
        (
            "self.deviceType == 'MIG' ? (has(self.nvidia) && has(self.nvidia.mig))"
            " : !(has(self.nvidia) && has(self.nvidia.mig))",
            "nvidia.mig.profile is required when deviceType is MIG and forbidden otherwise",
        ),
        ("!has(self.nvidia) || self.vendor == 'Nvidia'", "nvidia settings require vendor Nvidia"),
        (
            "!has(self.driverCapabilities) || self.vendor == 'Nvidia'",
            "driverCapabilities require vendor Nvidia",
        ),
        (
            "!has(self.sharing) || !has(self.sharing.strategy) || self.sharing.strategy == 'Exclusive'"
            " || self.deviceType == 'Physical'",
            "sharing strategies TimeSlicing and MPS require deviceType Physical",
        ),
    )

    vendor: Vendor = Field(description="GPU vendor.")
    device_type: DeviceType = Field(description="Physical (a whole card) or MIG (a MIG partition).")
    requirements: Requirements | None = Field(default=None, description="Minimum device requirements.")
    nvidia: NvidiaClass | None = Field(default=None, description="NVIDIA-specific settings.")
    # The CRD defaults an absent ``sharing`` to ``{}`` (and so its strategy to Exclusive): the API
    # server applies schema defaults when it decodes a request and when it reads from etcd, so every
    # class, old ones included, has a strategy for ``kubectl get``'s Strategy column to show (a
    # printer column reads one JSONPath and has no fallback). The model keeps None, which it reads
    # as Exclusive, for objects built in code.
    sharing: Sharing | None = Field(
        default=None,
        description="Sharing policy; Exclusive when absent.",
        json_schema_extra={"default": {}},
    )
    driver_capabilities: list[DriverCapability] | None = Field(
        default=None,
        min_length=1,
        max_length=len(DriverCapability),
        description="The NVIDIA driver capabilities the class's containers get (compute, utility, "
        "graphics, video, display); when unset, the node's default. A node whose driver lacks one "
        "fails the Prepare.",
    )
    selector: Selector | None = Field(default=None, description="Which PhysicalGPUs may provide devices.")
    names: list[ObjectName] | None = Field(
        default=None,
        max_length=MAX_NAMES,
        description="If set, only the PhysicalGPUs with these names may provide devices (matched by "
        "the card's UUID once gpu-handler has read it).",
    )
    extended_resource_name: str | None = Field(
        default=None,
        max_length=317,
        pattern=EXTENDED_RESOURCE_PATTERN,
        description="Extended resource name Pods request the class by; gpu.deckhouse.io/<class name> "
        "when unset.",
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
        if self.nvidia is not None and self.vendor is not Vendor.NVIDIA:
            raise ValueError(f"spec.nvidia requires spec.vendor Nvidia, not {self.vendor.value}")
        if self.driver_capabilities is not None and self.vendor is not Vendor.NVIDIA:
            raise ValueError(
                f"spec.driverCapabilities requires spec.vendor Nvidia, not {self.vendor.value}: they "
                "name parts of NVIDIA's driver"
            )
        return self

    @model_validator(mode="after")
    def _shares_are_of_whole_cards(self) -> GPUClassSpec:
        strategy = self.sharing.strategy if self.sharing else SharingStrategy.EXCLUSIVE
        if strategy is not SharingStrategy.EXCLUSIVE and self.device_type is not DeviceType.PHYSICAL:
            raise ValueError(
                f"spec.sharing.strategy {strategy.value} requires spec.deviceType Physical, not "
                f"{self.device_type.value}: shares are offered of whole cards only"
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
