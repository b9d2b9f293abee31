"""What every rendered DaemonSet shares: names, labels, owner, node gate, and the container basics.

A DaemonSet is a pure function of the configuration document, the ConfigMap that holds it and the
namespace: nothing about the cluster's nodes goes into it. Nodes are chosen by the gate labels
gpu-controller keeps on them (``pkg.gpucontroller.names``), so a node joining or leaving never
changes a template, and never restarts a Pod of the DaemonSet (a hostname list in the template would:
docs/architecture.md#gate-labels-not-hostname-lists).

The selector (component + config name) is fixed forever: the API server refuses to change a
DaemonSet's selector, so nothing configurable may go into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubernetes.client import (
    V1Affinity,
    V1Capabilities,
    V1ConfigMap,
    V1Container,
    V1ContainerPort,
    V1DaemonSet,
    V1DaemonSetSpec,
    V1DaemonSetUpdateStrategy,
    V1EmptyDirVolumeSource,
    V1EnvVar,
    V1EnvVarSource,
    V1HostPathVolumeSource,
    V1HTTPGetAction,
    V1LabelSelector,
    V1LocalObjectReference,
    V1NodeAffinity,
    V1NodeSelector,
    V1NodeSelectorRequirement,
    V1NodeSelectorTerm,
    V1ObjectFieldSelector,
    V1PodSecurityContext,
    V1PodSpec,
    V1PodTemplateSpec,
    V1Probe,
    V1RollingUpdateDaemonSet,
    V1SeccompProfile,
    V1SecurityContext,
    V1Volume,
    V1VolumeMount,
)

from api.gpu.v1alpha1 import ComponentSettings, GPUOperatorConfigSpec
from pkg.framework.client.builtin_kinds import CONFIG_MAP, DAEMON_SET
from pkg.framework.reconcile.resource_builder import ResourceBuilder
from pkg.gpucontroller.names import (
    GATE_VALUE,
    LABEL_COMPONENT,
    LABEL_CONTROL_PLANE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_OPERATOR_CONFIG,
    LABEL_PART_OF,
    MANAGED_BY,
    PART_OF,
    Component,
)

NON_ROOT_USER = 65532
MAX_UNAVAILABLE = "10%"
NVIDIA_RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}
"""Read by the NVIDIA container runtime: every GPU's NVML view, no compute or graphics."""


@dataclass(frozen=True)
class RenderContext:
    """Where the DaemonSets go and what owns them: the configuration ConfigMap."""

    config_map: V1ConfigMap
    spec: GPUOperatorConfigSpec

    @property
    def config_name(self) -> str:
        return str(self.config_map.metadata.name) if self.config_map.metadata else ""

    @property
    def namespace(self) -> str:
        return str(self.config_map.metadata.namespace) if self.config_map.metadata else ""

    def daemon_set_name(self, component: Component) -> str:
        return f"{self.config_name}-{component.value}"


def labels(context: RenderContext, component: Component) -> dict[str, str]:
    return {
        LABEL_NAME: component.value,
        LABEL_COMPONENT: component.value,
        LABEL_PART_OF: PART_OF,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_OPERATOR_CONFIG: context.config_name,
    }


def selector_labels(context: RenderContext, component: Component) -> dict[str, str]:
    return {LABEL_COMPONENT: component.value, LABEL_OPERATOR_CONFIG: context.config_name}


def gate_selector(gate: str | None, settings: ComponentSettings) -> dict[str, str] | None:
    """The node selector: the settings' extra labels, then the component's gate label (which wins)."""
    selector = dict(settings.node_selector or {})
    if gate is not None:
        selector[gate] = GATE_VALUE
    return selector or None


def not_on_control_plane() -> V1Affinity:
    return V1Affinity(
        node_affinity=V1NodeAffinity(
            required_during_scheduling_ignored_during_execution=V1NodeSelector(
                node_selector_terms=[
                    V1NodeSelectorTerm(
                        match_expressions=[
                            V1NodeSelectorRequirement(key=LABEL_CONTROL_PLANE, operator="DoesNotExist")
                        ]
                    )
                ]
            )
        )
    )


def daemon_set(
    context: RenderContext,
    component: Component,
    settings: ComponentSettings,
    *,
    pod: V1PodSpec,
    rolling_update: V1RollingUpdateDaemonSet | None = None,
) -> V1DaemonSet:
    """The DaemonSet of ``component`` around ``pod``, with what every component's Pods share
    (ServiceAccount, pull secrets, priority, tolerations) filled in."""
    pod.service_account_name = settings.service_account_name
    # Without an account of its own a Pod would get the namespace's default token, which it has no use for.
    pod.automount_service_account_token = settings.service_account_name is not None
    pod.image_pull_secrets = [
        V1LocalObjectReference(name=n) for n in context.spec.image_pull_secrets or []
    ] or None
    pod.priority_class_name = settings.priority_class_name
    pod.tolerations = settings.tolerations
    return V1DaemonSet(
        api_version="apps/v1",
        kind="DaemonSet",
        # The ConfigMap controls the DaemonSet: deleting it (``helm uninstall``) lets the garbage
        # collector delete the DaemonSet and its Pods.
        metadata=(
            ResourceBuilder(context.daemon_set_name(component), namespace=context.namespace, kind=DAEMON_SET)
            .labels(labels(context, component))
            .controlled_by(context.config_map, CONFIG_MAP)
            .meta()
        ),
        spec=V1DaemonSetSpec(
            selector=V1LabelSelector(match_labels=selector_labels(context, component)),
            update_strategy=V1DaemonSetUpdateStrategy(
                type="RollingUpdate",
                rolling_update=rolling_update or V1RollingUpdateDaemonSet(max_unavailable=MAX_UNAVAILABLE),
            ),
            template=V1PodTemplateSpec(
                metadata=ResourceBuilder().labels(labels(context, component)).meta(), spec=pod
            ),
        ),
    )


def container(
    settings: ComponentSettings,
    *,
    name: str,
    command: Sequence[str] | None,
    args: Sequence[str] | None = None,
    env: Sequence[V1EnvVar] = (),
) -> V1Container:
    """The component's container: its image and, unless the settings replace them, the
    component's own command and arguments; the settings' ``env`` after the component's."""
    own_command, own_args = _list(command), _list(args)
    if settings.command is not None:
        own_command, own_args = list(settings.command), None
    return V1Container(
        name=name,
        image=settings.image,
        image_pull_policy=settings.image_pull_policy.value,
        command=own_command,
        args=list(settings.args) if settings.args is not None else own_args,
        env=[node_name_env(), *env, *(settings.env or [])],
        resources=settings.resources,
    )


def our_binary(
    settings: ComponentSettings,
    *,
    name: str,
    args: Sequence[str],
    env: Sequence[V1EnvVar],
    metrics_port: int,
    mounts: Sequence[V1VolumeMount],
) -> V1Container:
    """A container of one of our binaries (``name`` is also the command): its monitoring endpoint
    as the port named ``metrics`` with ``/healthz`` and ``/readyz`` probes, no privileges, a
    read-only root filesystem with ``/tmp`` as an emptyDir (:func:`tmp_volume`)."""
    main = container(settings, name=name, command=[name], args=args, env=env)
    main.ports = [V1ContainerPort(name="metrics", container_port=metrics_port, protocol="TCP")]
    main.liveness_probe = http_probe("/healthz", initial_delay=10)
    main.readiness_probe = http_probe("/readyz")
    main.security_context = restricted_container()
    main.volume_mounts = [*mounts, V1VolumeMount(name="tmp", mount_path="/tmp")]
    return main


def http_probe(path: str, *, initial_delay: int | None = None) -> V1Probe:
    """A probe of a monitoring endpoint (the container port named ``metrics``)."""
    return V1Probe(
        http_get=V1HTTPGetAction(path=path, port="metrics"),
        initial_delay_seconds=initial_delay,
        period_seconds=10,
        timeout_seconds=5,
        failure_threshold=3,
    )


def node_name_env() -> V1EnvVar:
    return field_env("NODE_NAME", "spec.nodeName")


def field_env(name: str, path: str) -> V1EnvVar:
    return V1EnvVar(name=name, value_from=V1EnvVarSource(field_ref=V1ObjectFieldSelector(field_path=path)))


def logging_env(spec: GPUOperatorConfigSpec) -> list[V1EnvVar]:
    """LOG_* of our own binaries (docs/architecture.md#logging): verbosity 10 when Debug asks for it and none
    is set."""
    log = spec.logging
    verbosity = log.debug_verbosity or (10 if log.level.value == "Debug" else 0)
    return [
        V1EnvVar(name="LOG_LEVEL", value=log.level.value),
        V1EnvVar(name="LOG_OUTPUT", value=log.output),
        V1EnvVar(name="LOG_DEBUG_VERBOSITY", value=str(verbosity)),
        V1EnvVar(name="LOG_DEBUG_CONTROLLER_LIST", value=",".join(log.debug_controllers or [])),
    ]


def restricted_pod() -> V1PodSecurityContext:
    """Our own binaries: a non-root user and the runtime's default seccomp profile."""
    return V1PodSecurityContext(
        run_as_non_root=True,
        run_as_user=NON_ROOT_USER,
        run_as_group=NON_ROOT_USER,
        seccomp_profile=V1SeccompProfile(type="RuntimeDefault"),
    )


def restricted_container() -> V1SecurityContext:
    """No privileges, no capabilities, a read-only root filesystem (``/tmp`` is an emptyDir)."""
    return V1SecurityContext(
        run_as_non_root=True,
        privileged=False,
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        capabilities=V1Capabilities(drop=["ALL"]),
        seccomp_profile=V1SeccompProfile(type="RuntimeDefault"),
    )


def host_path(name: str, path: str, kind: str | None = None) -> V1Volume:
    return V1Volume(name=name, host_path=V1HostPathVolumeSource(path=path, type=kind))


def tmp_volume() -> V1Volume:
    """Python's tempfile needs a writable /tmp when the root filesystem is read-only."""
    return V1Volume(name="tmp", empty_dir=V1EmptyDirVolumeSource(size_limit="16Mi"))


def env_of(values: Mapping[str, str]) -> list[V1EnvVar]:
    return [V1EnvVar(name=key, value=value) for key, value in values.items()]


def _list(values: Sequence[str] | None) -> list[str] | None:
    return list(values) if values is not None else None
