"""gpu-handler on the nodes whose cards are DriverReady (gate ``gpu.deckhouse.io/driver-ready``).

The Pod reads the host's sysfs read-only at ``/host/sys`` and the cards through the vendor backend
(NVML, which the NVIDIA container runtime mounts into the container when ``runtimeClassName`` names
it; ``NVIDIA_VISIBLE_DEVICES=all`` and ``NVIDIA_DRIVER_CAPABILITIES=utility`` are read by that
runtime). No privileges or root. The kubelet plugin's sockets and CDI folder are mounted here once
the plugin runs in this Pod.

A node that loses the gate (its validator fails or disappears) loses this Pod; its offers are
withdrawn by gpu-handler as soon as DriverReady leaves True, and the kubelet removes a driver's
ResourceSlices of a node 30 s after its plugin went away.
"""

from __future__ import annotations

from kubernetes.client import V1ContainerPort, V1DaemonSet, V1PodSpec, V1VolumeMount

from pkg.gpucontroller.names import LABEL_DRIVER_READY, Component
from pkg.gpucontroller.orchestrator.render.common import (
    RenderContext,
    container,
    daemon_set,
    env_of,
    gate_selector,
    host_path,
    logging_env,
    restricted_container,
    restricted_pod,
    tmp_volume,
)
from pkg.gpucontroller.orchestrator.render.node_agent import http_probe

NVIDIA_RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}


def render(context: RenderContext) -> V1DaemonSet:
    settings = context.spec.gpu_handler
    handler = container(
        settings,
        name=Component.GPU_HANDLER.value,
        command=["gpu-handler"],
        args=[
            f"--backend={settings.backend}",
            "--sysfs-root=/host/sys",
            f"--enrich-period={settings.enrich_period}",
            f"--publish={str(settings.publish).lower()}",
            f"--publish-resync-period={settings.publish_resync_period}",
            f"--metrics-bind-address=:{settings.metrics_port}",
        ],
        env=[*env_of(NVIDIA_RUNTIME_ENV), *logging_env(context.spec)],
    )
    handler.ports = [V1ContainerPort(name="metrics", container_port=settings.metrics_port, protocol="TCP")]
    handler.liveness_probe = http_probe("/healthz", initial_delay=10)
    handler.readiness_probe = http_probe("/readyz")
    handler.security_context = restricted_container()
    handler.volume_mounts = [
        V1VolumeMount(name="host-sys", mount_path="/host/sys", read_only=True),
        V1VolumeMount(name="tmp", mount_path="/tmp"),
    ]
    pod = V1PodSpec(
        containers=[handler],
        runtime_class_name=settings.runtime_class_name,
        security_context=restricted_pod(),
        node_selector=gate_selector(LABEL_DRIVER_READY, settings),
        volumes=[host_path("host-sys", "/sys", "Directory"), tmp_volume()],
    )
    return daemon_set(context, Component.GPU_HANDLER, settings, pod=pod)
