"""nv-hostengine (NVIDIA DCGM) on the nodes whose cards are DriverReady
(docs/architecture.md#vendor-components-run-unchanged).

NVIDIA's image, unchanged: ``nv-hostengine -n -b ALL -p <port>`` in the foreground, bound on the
node's address through ``hostPort`` so that the node's dcgm-exporter reaches it at ``$(NODE_IP)``.
SYS_ADMIN is what DCGM needs for profiling metrics; the NVIDIA container runtime
(``runtimeClassName``) gives it the driver and devices.
"""

from __future__ import annotations

from kubernetes.client import (
    V1Capabilities,
    V1ContainerPort,
    V1DaemonSet,
    V1PodSpec,
    V1Probe,
    V1SecurityContext,
    V1TCPSocketAction,
)

from pkg.gpucontroller.names import LABEL_DRIVER_READY, Component
from pkg.gpucontroller.orchestrator.render.common import (
    NVIDIA_RUNTIME_ENV,
    RenderContext,
    container,
    daemon_set,
    env_of,
    gate_selector,
)


def render(context: RenderContext) -> V1DaemonSet:
    settings = context.spec.dcgm
    engine = container(
        settings,
        name=Component.DCGM.value,
        command=["nv-hostengine"],
        args=["-n", "-b", "ALL", "-p", str(settings.port)],
        env=env_of(NVIDIA_RUNTIME_ENV),
    )
    engine.ports = [
        V1ContainerPort(name="dcgm", container_port=settings.port, host_port=settings.port, protocol="TCP")
    ]
    engine.readiness_probe = V1Probe(tcp_socket=V1TCPSocketAction(port="dcgm"), period_seconds=10)
    engine.security_context = V1SecurityContext(capabilities=V1Capabilities(add=["SYS_ADMIN"]))
    pod = V1PodSpec(
        containers=[engine],
        runtime_class_name=settings.runtime_class_name,
        node_selector=gate_selector(LABEL_DRIVER_READY, settings),
    )
    return daemon_set(context, Component.DCGM, settings, pod=pod)
