"""``gpu.deckhouse.io/v1alpha1``: PhysicalGPU (spec §4) and GPUClass (spec §5) as pydantic models.

Import from here rather than from the modules: the split into modules may change, these names do not.
``obj.to_api_dict()`` gives the JSON to send to the API server, ``Model.from_api_dict(d)`` parses what
it returns.
"""

from api.gpu.v1alpha1.common import (
    API_VERSION,
    GROUP,
    VERSION,
    ApiModel,
    Conditions,
    Int32,
    Int64,
    Vendor,
)
from api.gpu.v1alpha1.config import KIND as GPU_CONFIG_KIND
from api.gpu.v1alpha1.config import GpuConfig, GpuConfigError, parse_gpu_config
from api.gpu.v1alpha1.gpuclass import (
    KIND as GPU_CLASS_KIND,
)
from api.gpu.v1alpha1.gpuclass import (
    PLURAL as GPU_CLASS_PLURAL,
)
from api.gpu.v1alpha1.gpuclass import (
    DeviceType,
    Generated,
    GPUClass,
    GPUClassSpec,
    GPUClassStatus,
    MigClass,
    Mps,
    NvidiaClass,
    Requirements,
    Selector,
    Sharing,
    SharingStrategy,
    TimeSlicing,
    TimeSlicingInterval,
)
from api.gpu.v1alpha1.hardware import (
    Capabilities,
    MigPlacement,
    MigProfile,
    NodeInfo,
    NvidiaCapabilities,
    NvidiaMigCapabilities,
    OSInfo,
    PciClass,
    PciId,
    PciInfo,
)
from api.gpu.v1alpha1.physicalgpu import (
    KIND as PHYSICAL_GPU_KIND,
)
from api.gpu.v1alpha1.physicalgpu import (
    LABEL_DEVICE,
    LABEL_NODE,
    LABEL_VENDOR,
    CurrentState,
    DriverType,
    MigMode,
    NvidiaMigState,
    NvidiaState,
    PhysicalGPU,
    PhysicalGPUConditionType,
    PhysicalGPUSpec,
    PhysicalGPUStatus,
)
from api.gpu.v1alpha1.physicalgpu import (
    PLURAL as PHYSICAL_GPU_PLURAL,
)

__all__ = [
    "API_VERSION",
    "GPU_CLASS_KIND",
    "GPU_CLASS_PLURAL",
    "GPU_CONFIG_KIND",
    "GROUP",
    "LABEL_DEVICE",
    "LABEL_NODE",
    "LABEL_VENDOR",
    "PHYSICAL_GPU_KIND",
    "PHYSICAL_GPU_PLURAL",
    "VERSION",
    "ApiModel",
    "Capabilities",
    "Conditions",
    "CurrentState",
    "DeviceType",
    "DriverType",
    "GPUClass",
    "GPUClassSpec",
    "GPUClassStatus",
    "Generated",
    "GpuConfig",
    "GpuConfigError",
    "Int32",
    "Int64",
    "MigClass",
    "MigMode",
    "MigPlacement",
    "MigProfile",
    "Mps",
    "NodeInfo",
    "NvidiaCapabilities",
    "NvidiaClass",
    "NvidiaMigCapabilities",
    "NvidiaMigState",
    "NvidiaState",
    "OSInfo",
    "PciClass",
    "PciId",
    "PciInfo",
    "PhysicalGPU",
    "PhysicalGPUConditionType",
    "PhysicalGPUSpec",
    "PhysicalGPUStatus",
    "Requirements",
    "Selector",
    "Sharing",
    "SharingStrategy",
    "TimeSlicing",
    "TimeSlicingInterval",
    "Vendor",
    "parse_gpu_config",
]
