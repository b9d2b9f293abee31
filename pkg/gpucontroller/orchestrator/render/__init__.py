"""The DaemonSets of the node components, rendered from the configuration document.

One module per component (what its Pods need from the host, and why), :mod:`.common` for what
they share. :func:`render_all` is the only entry point the controller uses: the DaemonSet of every
enabled component, keyed by component. Rendering is pure: same document, same DaemonSets.
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes.client import V1DaemonSet

from pkg.gpucontroller.names import Component
from pkg.gpucontroller.orchestrator.render import dcgm, dcgm_exporter, gpu_handler, node_agent, validator
from pkg.gpucontroller.orchestrator.render.common import RenderContext

RENDERERS: dict[Component, Callable[[RenderContext], V1DaemonSet]] = {
    Component.NODE_AGENT: node_agent.render,
    Component.VALIDATOR: validator.render,
    Component.GPU_HANDLER: gpu_handler.render,
    Component.GPU_HANDLER_AMD: gpu_handler.render_amd,
    Component.DCGM: dcgm.render,
    Component.DCGM_EXPORTER: dcgm_exporter.render,
}


def enabled_components(context: RenderContext) -> list[Component]:
    spec = context.spec
    settings = {
        Component.NODE_AGENT: spec.node_agent,
        Component.VALIDATOR: spec.validator,
        Component.GPU_HANDLER: spec.gpu_handler,
        Component.DCGM: spec.dcgm,
        Component.DCGM_EXPORTER: spec.dcgm_exporter,
    }
    enabled = [component for component, value in settings.items() if value.enabled]
    # The AMD gpu-handler is a second DaemonSet of the handler's settings: it runs with the handler.
    if spec.gpu_handler.enabled and spec.gpu_handler.amd.enabled:
        enabled.append(Component.GPU_HANDLER_AMD)
    return enabled


def render_all(context: RenderContext) -> dict[Component, V1DaemonSet]:
    """The DaemonSet of every enabled component."""
    return {component: RENDERERS[component](context) for component in enabled_components(context)}


__all__ = ["RENDERERS", "RenderContext", "enabled_components", "render_all"]
