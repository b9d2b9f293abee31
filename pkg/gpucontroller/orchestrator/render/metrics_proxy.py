"""kube-rbac-proxy in front of our node components' ``/metrics`` (``metricsProxy`` of the
configuration document, :class:`~api.gpu.v1alpha1.MetricsProxySettings`).

The component's endpoint moves to loopback (``--metrics-bind-address=127.0.0.1:<port>``), where only
containers of its own Pod reach it; the proxy, a second container, serves HTTPS on the proxy port
(a self-signed certificate it makes at start) and lets ``/metrics`` through only for a bearer token
allowed to ``get`` the ``/metrics`` non-resource URL (the chart's ``<release>-metrics-reader``
ClusterRole; any other path is checked as the non-resource URL it names, which that role does not
grant). It checks tokens with TokenReviews and SubjectAccessReviews, which the component's
ServiceAccount is granted. ``/healthz`` and ``/readyz`` pass without a token, so the kubelet's
probes (now HTTPS, through the proxy) keep working.
"""

from __future__ import annotations

from kubernetes.client import V1Container, V1ContainerPort, V1HTTPGetAction, V1PodSpec

from api.gpu.v1alpha1 import MetricsProxySettings
from pkg.gpucontroller.orchestrator.render.common import NON_ROOT_USER, restricted_container

CONTAINER = "kube-rbac-proxy"
PORT_NAME = "https-metrics"
PROBE_PATHS = "/healthz,/readyz"


def put_in_front(pod: V1PodSpec, proxy: MetricsProxySettings) -> None:
    """Moves the Pod's first container's metrics endpoint behind a kube-rbac-proxy sidecar."""
    main = pod.containers[0]
    port = next(p.container_port for p in main.ports or [] if p.name == "metrics")
    main.args = [
        f"--metrics-bind-address=127.0.0.1:{port}" if a.startswith("--metrics-bind-address=") else a
        for a in main.args or []
    ]
    main.ports = None
    for probe in (main.liveness_probe, main.readiness_probe):
        if probe is not None and probe.http_get is not None:
            # By number: a probe may name only its own container's ports, and this is the sidecar's.
            probe.http_get = V1HTTPGetAction(path=probe.http_get.path, port=proxy.port, scheme="HTTPS")
    # Non-root even where the Pod runs as root (gpu-handler's kubelet plugin).
    security = restricted_container()
    security.run_as_user = security.run_as_group = NON_ROOT_USER
    sidecar = V1Container(
        name=CONTAINER,
        image=proxy.image,
        image_pull_policy=proxy.image_pull_policy.value,
        args=[
            f"--secure-listen-address=0.0.0.0:{proxy.port}",
            f"--upstream=http://127.0.0.1:{port}/",
            f"--ignore-paths={PROBE_PATHS}",
        ],
        ports=[V1ContainerPort(name=PORT_NAME, container_port=proxy.port, protocol="TCP")],
        resources=proxy.resources,
        security_context=security,
    )
    pod.containers = [*pod.containers, sidecar]
