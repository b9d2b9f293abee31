"""dcgm-exporter on the nodes whose cards are DriverReady
(docs/architecture.md#vendor-components-run-unchanged).

NVIDIA's image, unchanged; its own entry point, configured by environment: the listen address,
the node's nv-hostengine (``DCGM_REMOTE_HOSTENGINE_INFO=$(NODE_IP):<port>`` while the dcgm
component runs; otherwise the exporter embeds its own engine), and Kubernetes Pod labels on the
metrics from the kubelet's pod-resources socket (read-only) when ``podResourcesPath`` is set.
"""

from __future__ import annotations

from kubernetes.client import (
    V1Capabilities,
    V1ContainerPort,
    V1DaemonSet,
    V1HTTPGetAction,
    V1PodSpec,
    V1Probe,
    V1SecurityContext,
    V1VolumeMount,
)

from pkg.gpucontroller.names import LABEL_DRIVER_READY, Component
from pkg.gpucontroller.orchestrator.render.common import (
    NVIDIA_RUNTIME_ENV,
    RenderContext,
    container,
    daemon_set,
    env_of,
    field_env,
    gate_selector,
    host_path,
)

POD_RESOURCES = "/var/lib/kubelet/pod-resources"


def render(context: RenderContext) -> V1DaemonSet:
    settings = context.spec.dcgm_exporter
    dcgm = context.spec.dcgm
    env = {**NVIDIA_RUNTIME_ENV, "DCGM_EXPORTER_LISTEN": f":{settings.port}"}
    env["DCGM_EXPORTER_KUBERNETES"] = "true" if settings.pod_resources_path else "false"
    if dcgm.enabled:
        env["DCGM_REMOTE_HOSTENGINE_INFO"] = f"$(NODE_IP):{dcgm.port}"
    exporter = container(
        settings,
        name=Component.DCGM_EXPORTER.value,
        command=None,
        env=[field_env("NODE_IP", "status.hostIP"), *env_of(env)],
    )
    exporter.ports = [V1ContainerPort(name="metrics", container_port=settings.port, protocol="TCP")]
    probe = V1HTTPGetAction(path="/health", port="metrics")
    exporter.liveness_probe = V1Probe(http_get=probe, initial_delay_seconds=20, period_seconds=10)
    exporter.readiness_probe = V1Probe(http_get=probe, period_seconds=10)
    exporter.security_context = V1SecurityContext(
        allow_privilege_escalation=False, capabilities=V1Capabilities(drop=["ALL"])
    )
    pod = V1PodSpec(
        containers=[exporter],
        runtime_class_name=settings.runtime_class_name,
        node_selector=gate_selector(LABEL_DRIVER_READY, settings),
    )
    if settings.pod_resources_path:
        exporter.volume_mounts = [
            V1VolumeMount(name="pod-resources", mount_path=POD_RESOURCES, read_only=True)
        ]
        pod.volumes = [host_path("pod-resources", settings.pod_resources_path, "Directory")]
    return daemon_set(context, Component.DCGM_EXPORTER, settings, pod=pod)
