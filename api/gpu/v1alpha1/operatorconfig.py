"""GPUOperatorConfig: which node components gpu-controller runs, with which images and settings
(gpu-controller's orchestrator renders a DaemonSet per component from it).

The object is a versioned document stored under the key ``config.yaml`` of a ConfigMap in the
namespace the node components run in, not a custom resource. Helm cannot install a custom resource
in the same release as its CRD ("resource mapping not found ... ensure CRDs are installed first":
it maps every object before it creates any), and the chart keeps its CRDs in templates so that
upgrades reach them. A ConfigMap is created with the release, and deleting it with ``helm
uninstall`` lets the garbage collector remove every DaemonSet it owns. The document still has an
``apiVersion`` and ``kind``, as the kubelet's configuration file does, so it can change shape
between versions and could become a custom resource later without a new schema.

Unlike the objects the API server stores, the document is parsed strictly (``extra="forbid"``): no
server prunes unknown fields here, and a misspelt setting must be an error naming it, not a setting
silently ignored. Images have no defaults in code: the chart's values are the one place that names
them (our image for gpu-node-agent and gpu-handler, NVIDIA's for the validator and DCGM).

The five components and where gpu-controller runs them (the node labels it maintains; docs in
``docs/node-components.md``):

=================  ==============================================================================
``nodeAgent``      every node but the control plane (``node-role.kubernetes.io/control-plane``)
``validator``      nodes with NVIDIA PhysicalGPUs (``gpu.deckhouse.io/nvidia.present=true``)
``gpuHandler``     nodes whose cards are DriverReady (``gpu.deckhouse.io/driver-ready=true``); with
                   ``gpuHandler.amd`` on, a second DaemonSet for AMD nodes (``amd.present``), and
                   the first one only on NVIDIA nodes (``nvidia.present``)
``dcgm``           the same (nv-hostengine)
``dcgmExporter``   the same
=================  ==============================================================================

``computeDomains`` is no DaemonSet: gpu-controller runs one IMEX daemon Pod per member node of
each ComputeDomain, from the settings here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from kubernetes.client import V1EnvVar, V1ResourceRequirements, V1Toleration
from pydantic import ConfigDict, Field, model_validator

from api.gpu.v1alpha1.common import API_VERSION, ApiModel
from api.gpu.v1alpha1.computedomain import MAX_CHANNEL as IMEX_MAX_CHANNEL
from api.gpu.v1alpha1.gpuclass import DriverCapability

KIND: Final = "GPUOperatorConfig"
CONFIG_KEY: Final = "config.yaml"
"""The key of the ConfigMap's ``data`` that holds the document."""

DURATION_PATTERN: Final = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h)?$"
Port = Annotated[int, Field(ge=1, le=65535)]
Duration = Annotated[str, Field(pattern=DURATION_PATTERN)]


class ConfigModel(ApiModel):
    """A model of the configuration document: strict about unknown fields (see the module docs)."""

    model_config = ConfigDict(extra="forbid")


class PullPolicy(StrEnum):
    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class LogLevel(StrEnum):
    DEBUG = "Debug"
    INFO = "Info"
    WARN = "Warn"
    ERROR = "Error"


class ComponentSettings(ConfigModel):
    """What every node component has: whether it runs, its image, and how its Pods are placed.

    ``command`` replaces the component's command *and* its arguments (``args``, when set, are passed
    instead): stand-ins in tests, or an upstream image whose entry point moved. ``env`` is added to
    the environment gpu-controller sets.
    """

    enabled: bool = Field(default=True, description="Run the component's DaemonSet.")
    image: str | None = Field(
        default=None, min_length=1, description="Container image; required when enabled."
    )
    image_pull_policy: PullPolicy = Field(default=PullPolicy.IF_NOT_PRESENT, description="Image pull policy.")
    command: list[str] | None = Field(
        default=None, description="Replaces the component's command and arguments."
    )
    args: list[str] | None = Field(default=None, description="Arguments passed instead of the component's.")
    env: list[V1EnvVar] | None = Field(default=None, description="Extra environment variables.")
    resources: V1ResourceRequirements | None = Field(
        default=None, description="CPU and memory of the container."
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="More labels a node must have, on top of the component's node gate."
    )
    tolerations: list[V1Toleration] | None = Field(default=None, description="Tolerations of the Pods.")
    priority_class_name: str | None = Field(default=None, description="PriorityClass of the Pods.")
    service_account_name: str | None = Field(
        default=None,
        description="ServiceAccount of the Pods; without one they run as the namespace's default "
        "account with no token mounted.",
    )

    @model_validator(mode="after")
    def _image_when_enabled(self) -> ComponentSettings:
        if self.enabled and not self.image:
            raise ValueError("image is required when the component is enabled")
        return self


class NodeAgentSettings(ComponentSettings):
    resync_period: Duration = Field(default="5m", description="Safety resync (--resync-period).")
    udev: bool = Field(
        default=True,
        description="Listen to kernel PCI uevents (--udev); sets hostNetwork, where uevents arrive.",
    )
    metrics_port: Port = Field(default=9478, description="Port of /metrics, /healthz and /readyz.")


class ValidatorSettings(ComponentSettings):
    """The GPU validator: NVIDIA's, unchanged (docs/architecture.md#vendor-components-run-unchanged). Its
    validation runs in an init container (``command``/``args``/``env``; NVIDIA's image checks the driver with
    ``nvidia-validator`` and ``COMPONENT=driver``); the Pod becomes Ready once it succeeded and, if
    ``readinessCommand`` is set, while that command succeeds."""

    host_root: str = Field(
        default="/", min_length=1, description="Host folder mounted read-only at /host (the host's root)."
    )
    readiness_command: list[str] | None = Field(
        default=None, description="Exec readiness probe of the validator's main container."
    )


HOST_PATH_PATTERN: Final = r"^/[^\s]*[^/\s]$"
ROOT_PATH_PATTERN: Final = r"^/([^\s]*[^/\s])?$"  # a host path, or the host's root itself


class KubeletPluginSettings(ConfigModel):
    """gpu-handler's kubelet plugin (NodePrepareResources/NodeUnprepareResources, docs/kubelet-plugin.md)."""

    enabled: bool = Field(default=True, description="Serve the kubelet (--kubelet-plugin).")
    kubelet_root: str = Field(
        default="/var/lib/kubelet",
        pattern=HOST_PATH_PATTERN,
        description="The kubelet's root folder on the nodes.",
    )
    cdi_dir: str = Field(
        default="/var/run/cdi",
        pattern=HOST_PATH_PATTERN,
        description="Where the container runtime reads CDI specs.",
    )
    mps_root: str = Field(
        default="/run/gpu.deckhouse.io/mps",
        pattern=HOST_PATH_PATTERN,
        description="Where MPS-shared cards get their control daemon's folders, one per card (--mps-root).",
    )
    lock_timeout: Duration = Field(default="30s", description="How long a prepare waits for the node lock.")
    driver_capabilities: list[DriverCapability] | None = Field(
        default=None,
        min_length=1,
        description="The driver capabilities a container gets when its device's config names none "
        "(--driver-capabilities); null: every capability the driver root has, as NVIDIA's CDI spec "
        "gives.",
    )


class AttributionSettings(ConfigModel):
    """Per-Pod attribution of the cards' processes (needs the kubelet plugin: hostPID, the checkpoint)."""

    interval: Duration = Field(
        default="10s",
        description="Read the processes on every card this often (--attribution-interval); 0s: off.",
    )
    max_series: int = Field(
        default=1000,
        ge=1,
        description="Process rows per node at most; the smallest beyond it are summed per device "
        "(--attribution-max-series).",
    )
    usage_status_interval: Duration = Field(
        default="30s",
        description="Write a claim's usage into its status.devices at most this often, on material "
        "change (--usage-status-interval); 0s: never.",
    )


class AmdHandlerSettings(ConfigModel):
    """A second gpu-handler DaemonSet, ``<config>-gpu-handler-amd``, for the nodes with AMD cards
    (``gpu.deckhouse.io/amd.present`` and ``driver-ready``), so that one release serves NVIDIA and AMD
    nodes. It shares the handler's image, account, resources, placement, kubelet-plugin folders and
    periods; it leaves out what only NVIDIA's backend uses (the runtime class and its environment,
    the MPS folder, the driver root, ``nvidia-cdi-hook``). While it runs, the NVIDIA DaemonSet is
    placed by ``gpu.deckhouse.io/nvidia.present`` too, so neither backend starts on a node with
    none of its cards; while it is off, the NVIDIA DaemonSet is rendered as before."""

    enabled: bool = Field(default=False, description="Run the AMD gpu-handler DaemonSet.")
    backend: str = Field(
        default="amd", min_length=1, description="Its backend (--backend): amd, or simulated-amd in tests."
    )


class GpuHandlerSettings(ComponentSettings):
    backend: str = Field(default="nvidia", min_length=1, description="Vendor backend (--backend).")
    amd: AmdHandlerSettings = Field(
        default_factory=AmdHandlerSettings, description="A second DaemonSet for the nodes with AMD cards."
    )
    kubelet_plugin: KubeletPluginSettings = Field(
        default_factory=KubeletPluginSettings, description="The kubelet plugin; root and privileged while on."
    )
    runtime_class_name: str | None = Field(default=None, description="RuntimeClass of the Pods.")
    enrich_period: Duration = Field(default="60s", description="Re-read period (--enrich-period).")
    publish: bool = Field(default=True, description="Publish ResourceSlices (--publish).")
    publish_resync_period: Duration = Field(default="5m", description="--publish-resync-period.")
    imex_channels: int = Field(
        default=128,
        ge=0,
        le=IMEX_MAX_CHANNEL,
        description="IMEX channels each node in a multi-node NVLink fabric offers to ComputeDomains "
        "(--imex-channels; channels 1..N, so at most N domains on one node at once); 0 offers none.",
    )
    metrics_port: Port = Field(default=8080, description="Port of /metrics, /healthz and /readyz.")
    attribution: AttributionSettings = Field(
        default_factory=AttributionSettings, description="Per-Pod attribution of the cards' processes."
    )


class DcgmSettings(ComponentSettings):
    """nv-hostengine, NVIDIA's DCGM daemon, reachable by the exporter at the node's address."""

    runtime_class_name: str | None = Field(default=None, description="RuntimeClass of the Pods.")
    port: Port = Field(default=5555, description="nv-hostengine's port, also bound on the node (hostPort).")


class DcgmExporterSettings(ComponentSettings):
    runtime_class_name: str | None = Field(default=None, description="RuntimeClass of the Pods.")
    port: Port = Field(default=9400, description="Port of the Prometheus endpoint (/metrics, /health).")
    pod_resources_path: str | None = Field(
        default="/var/lib/kubelet/pod-resources",
        description="The kubelet's pod-resources folder, for per-Pod labels on the metrics; empty "
        "or null leaves it out.",
    )


class ComputeDomainSettings(ComponentSettings):
    """The IMEX daemons gpu-controller runs for ComputeDomains (docs/compute-domains.md): one Pod per
    node of each NVLink clique a domain uses (the clique's ensemble, shared by its domains), in the
    node components' namespace, with the ensemble's ConfigMap (``config.cfg``,
    ``nodes_config.cfg``, ``hosts``) at ``/etc/nvidia-imex``.

    ``command`` (with ``args``) starts the daemon; left out, NVIDIA's ``nvidia-imex`` is started from
    the driver root (mounted at ``/driver-root``) by a shell wrapper that keeps the container's
    ``/etc/hosts`` equal to its own lines plus the ensemble's ``hosts`` file, so the stable peer
    names of ``nodes_config.cfg`` resolve to the daemons' current addresses. ``readinessCommand`` is
    the daemon container's exec readiness probe: a member is ready, and Prepare of its channel goes
    on, once it succeeds. Off, no daemon runs and domains report it; their channels are still
    assigned."""

    port: Port = Field(default=50000, description="The daemons' SERVER_PORT (NVIDIA's default).")
    readiness_command: list[str] | None = Field(
        default=None,
        description="Exec readiness probe of the daemon; null: nvidia-imex-ctl -q from the driver root.",
    )
    runtime_class_name: str | None = Field(default=None, description="RuntimeClass of the Pods.")
    privileged: bool = Field(
        default=True,
        description="Run the daemon privileged: nvidia-imex opens the driver's fabric-imex-mgmt "
        "capability; off only for the simulated daemon.",
    )


class LoggingSettings(ConfigModel):
    """LOG_* of gpu-node-agent and gpu-handler (docs/architecture.md#logging)."""

    level: LogLevel = Field(default=LogLevel.INFO, description="LOG_LEVEL.")
    output: Literal["stdout", "stderr"] = Field(default="stderr", description="LOG_OUTPUT.")
    debug_verbosity: int = Field(default=0, ge=0, description="LOG_DEBUG_VERBOSITY.")
    debug_controllers: list[str] | None = Field(default=None, description="LOG_DEBUG_CONTROLLER_LIST.")


class MetricsProxySettings(ConfigModel):
    """kube-rbac-proxy in front of gpu-node-agent's and gpu-handler's ``/metrics``:
    the component listens on loopback only, and the proxy serves HTTPS on ``port``, letting a
    request through when its bearer token may ``get`` the ``/metrics`` non-resource URL
    (TokenReview, then SubjectAccessReview). ``/healthz`` and ``/readyz`` pass unauthenticated, for
    the kubelet's probes."""

    image: str = Field(min_length=1, description="The kube-rbac-proxy image.")
    image_pull_policy: PullPolicy = Field(default=PullPolicy.IF_NOT_PRESENT, description="Image pull policy.")
    port: Port = Field(default=8443, description="The HTTPS port of /metrics.")
    resources: V1ResourceRequirements | None = Field(default=None, description="CPU and memory of the proxy.")


class SimulatedHostsSettings(ConfigModel):
    """Tests and demos only: point gpu-node-agent and gpu-handler at simulated GPU hosts instead
    of the node's own ``/sys``, ``/dev``, ``/proc``, kubelet and CDI folders.

    ``dir`` is a host folder with one folder per node, named after the node, laid out as
    ``pkg.devcluster`` makes them: ``<node>/host/root`` (the fixture sysfs tree, with the host's
    ``etc/os-release`` and ``proc/``), ``<node>/host/dev`` (device nodes), ``<node>/host/nvml`` (the
    simulated NVML's state), ``<node>/kubelet/root`` (the kubelet's root), ``<node>/cdi`` and
    ``<node>/mps``. It is mounted at the same path in the Pods (CDI specs and the kubelet name host
    paths), and each Pod finds its node's folder through ``$(NODE_NAME)``.
    """

    dir: str = Field(pattern=HOST_PATH_PATTERN, description="The folder of the simulated hosts.")
    pci_ids: str | None = Field(
        default=None, pattern=HOST_PATH_PATTERN, description="A pci.ids file inside dir (--pci-ids)."
    )


class GPUOperatorConfigSpec(ConfigModel):
    driver_root: str = Field(
        default="/",
        pattern=ROOT_PATH_PATTERN,
        description="Where the NVIDIA driver is installed on the nodes: / (the host's packages), "
        "/run/nvidia/driver (a containerised driver) or a driver folder such as /usr/local/nvidia. The "
        "validator checks the driver there and gpu-handler gives containers its libraries, tools and "
        "firmware through the base CDI spec (--driver-root-on-host).",
    )
    image_pull_secrets: list[str] | None = Field(
        default=None, description="Names of Secrets for pulling the components' images."
    )
    logging: LoggingSettings = Field(
        default_factory=LoggingSettings, description="Logging of our components."
    )
    node_agent: NodeAgentSettings = Field(default_factory=lambda: NodeAgentSettings(enabled=False))
    validator: ValidatorSettings = Field(default_factory=lambda: ValidatorSettings(enabled=False))
    gpu_handler: GpuHandlerSettings = Field(default_factory=lambda: GpuHandlerSettings(enabled=False))
    dcgm: DcgmSettings = Field(default_factory=lambda: DcgmSettings(enabled=False))
    dcgm_exporter: DcgmExporterSettings = Field(default_factory=lambda: DcgmExporterSettings(enabled=False))
    compute_domains: ComputeDomainSettings = Field(
        default_factory=lambda: ComputeDomainSettings(enabled=False),
        description="The IMEX daemons of ComputeDomains.",
    )
    metrics_proxy: MetricsProxySettings | None = Field(
        default=None, description="kube-rbac-proxy in front of our components' /metrics; none: plain HTTP."
    )
    simulated_hosts: SimulatedHostsSettings | None = Field(
        default=None, description="Tests and demos only: simulated GPU hosts instead of the nodes' own."
    )


class GPUOperatorConfig(ConfigModel):
    """The document (see the module docs). A component left out of ``spec`` does not run."""

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["GPUOperatorConfig"] = Field(default="GPUOperatorConfig")
    spec: GPUOperatorConfigSpec = Field(default_factory=GPUOperatorConfigSpec)
