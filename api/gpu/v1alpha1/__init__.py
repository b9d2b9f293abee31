"""``gpu.deckhouse.io/v1alpha1``: PhysicalGPU (one card's inventory), GPUClass (a kind of GPU),
ClaimExplanation (a request to explain a claim) and ComputeDomain (Pods on several nodes sharing GPU
memory through IMEX) as pydantic models, and GPUOperatorConfig, the node
components' configuration document (a ConfigMap's ``config.yaml``).

Import from here rather than from the modules: the split into modules may change, these names do not.
``obj.to_api_dict()`` gives the JSON to send to the API server, ``Model.from_api_dict(d)`` parses what
it returns.
"""

from api.gpu.v1alpha1.claimexplanation import KIND as CLAIM_EXPLANATION_KIND
from api.gpu.v1alpha1.claimexplanation import MAX_REPORT_BYTES as CLAIM_EXPLANATION_MAX_REPORT_BYTES
from api.gpu.v1alpha1.claimexplanation import PLURAL as CLAIM_EXPLANATION_PLURAL
from api.gpu.v1alpha1.claimexplanation import (
    ClaimExplanation,
    ClaimExplanationSpec,
    ClaimExplanationStatus,
    ExplanationCause,
    ExplanationFacts,
    ExplanationOutcome,
    ExplanationStrategy,
)
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
from api.gpu.v1alpha1.computedomain import CHANNEL_ATTRIBUTE as COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE
from api.gpu.v1alpha1.computedomain import CHANNEL_CONFIG_KIND as COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND
from api.gpu.v1alpha1.computedomain import CHANNEL_DEVICE_CLASS as COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS
from api.gpu.v1alpha1.computedomain import DEVICE_TYPE as IMEX_CHANNEL_DEVICE_TYPE
from api.gpu.v1alpha1.computedomain import FINALIZER as COMPUTE_DOMAIN_FINALIZER
from api.gpu.v1alpha1.computedomain import KIND as COMPUTE_DOMAIN_KIND
from api.gpu.v1alpha1.computedomain import MAX_CHANNEL as IMEX_MAX_CHANNEL
from api.gpu.v1alpha1.computedomain import PLURAL as COMPUTE_DOMAIN_PLURAL
from api.gpu.v1alpha1.computedomain import (
    Channel,
    ClaimTemplateRef,
    ComputeDomain,
    ComputeDomainChannelConfig,
    ComputeDomainSpec,
    ComputeDomainStatus,
    DomainDevices,
    DomainNode,
    DomainState,
)
from api.gpu.v1alpha1.config import KIND as GPU_CONFIG_KIND
from api.gpu.v1alpha1.config import GpuConfig, GpuConfigError, parse_gpu_config
from api.gpu.v1alpha1.devicestatus import KIND as DEVICE_STATUS_DATA_KIND
from api.gpu.v1alpha1.devicestatus import DeviceStatusData, ShareLimits, UsageFigures
from api.gpu.v1alpha1.deviceusage import KIND as DEVICE_USAGE_KIND
from api.gpu.v1alpha1.deviceusage import MAX_CONTAINERS as DEVICE_USAGE_MAX_CONTAINERS
from api.gpu.v1alpha1.deviceusage import ContainerUsage, DeviceUsage
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
    AmdCapabilities,
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
from api.gpu.v1alpha1.operatorconfig import (
    CONFIG_KEY as OPERATOR_CONFIG_KEY,
)
from api.gpu.v1alpha1.operatorconfig import (
    AmdHandlerSettings,
    ComponentSettings,
    ComputeDomainSettings,
    DcgmExporterSettings,
    DcgmSettings,
    GpuHandlerSettings,
    GPUOperatorConfig,
    GPUOperatorConfigSpec,
    LoggingSettings,
    MetricsProxySettings,
    NodeAgentSettings,
    PullPolicy,
    SimulatedHostsSettings,
    ValidatorSettings,
)
from api.gpu.v1alpha1.physicalgpu import (
    KIND as PHYSICAL_GPU_KIND,
)
from api.gpu.v1alpha1.physicalgpu import (
    LABEL_DEVICE,
    LABEL_NODE,
    LABEL_VENDOR,
    AmdState,
    CurrentState,
    DriverType,
    FabricState,
    MigMode,
    NvidiaFabric,
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
    "CLAIM_EXPLANATION_KIND",
    "CLAIM_EXPLANATION_MAX_REPORT_BYTES",
    "CLAIM_EXPLANATION_PLURAL",
    "COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE",
    "COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND",
    "COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS",
    "COMPUTE_DOMAIN_FINALIZER",
    "COMPUTE_DOMAIN_KIND",
    "COMPUTE_DOMAIN_PLURAL",
    "DEVICE_STATUS_DATA_KIND",
    "DEVICE_USAGE_KIND",
    "DEVICE_USAGE_MAX_CONTAINERS",
    "GPU_CLASS_KIND",
    "GPU_CLASS_PLURAL",
    "GPU_CONFIG_KIND",
    "GROUP",
    "IMEX_CHANNEL_DEVICE_TYPE",
    "IMEX_MAX_CHANNEL",
    "LABEL_DEVICE",
    "LABEL_NODE",
    "LABEL_VENDOR",
    "OPERATOR_CONFIG_KEY",
    "PHYSICAL_GPU_KIND",
    "PHYSICAL_GPU_PLURAL",
    "VERSION",
    "AmdCapabilities",
    "AmdHandlerSettings",
    "AmdState",
    "ApiModel",
    "Capabilities",
    "Channel",
    "ClaimExplanation",
    "ClaimExplanationSpec",
    "ClaimExplanationStatus",
    "ClaimTemplateRef",
    "ComponentSettings",
    "ComputeDomain",
    "ComputeDomainChannelConfig",
    "ComputeDomainSettings",
    "ComputeDomainSpec",
    "ComputeDomainStatus",
    "Conditions",
    "ContainerUsage",
    "CurrentState",
    "DcgmExporterSettings",
    "DcgmSettings",
    "DeviceStatusData",
    "DeviceType",
    "DeviceUsage",
    "DomainDevices",
    "DomainNode",
    "DomainState",
    "DriverType",
    "ExplanationCause",
    "ExplanationFacts",
    "ExplanationOutcome",
    "ExplanationStrategy",
    "FabricState",
    "GPUClass",
    "GPUClassSpec",
    "GPUClassStatus",
    "GPUOperatorConfig",
    "GPUOperatorConfigSpec",
    "Generated",
    "GpuConfig",
    "GpuConfigError",
    "GpuHandlerSettings",
    "Int32",
    "Int64",
    "LoggingSettings",
    "MetricsProxySettings",
    "MigClass",
    "MigMode",
    "MigPlacement",
    "MigProfile",
    "Mps",
    "NodeAgentSettings",
    "NodeInfo",
    "NvidiaCapabilities",
    "NvidiaClass",
    "NvidiaFabric",
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
    "PullPolicy",
    "Requirements",
    "Selector",
    "ShareLimits",
    "Sharing",
    "SharingStrategy",
    "SimulatedHostsSettings",
    "TimeSlicing",
    "TimeSlicingInterval",
    "UsageFigures",
    "ValidatorSettings",
    "Vendor",
    "parse_gpu_config",
]
