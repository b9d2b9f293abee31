"""The scratch state of one orchestrator pass: filled in chain order (parse, apply, prune)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.client import V1ConfigMap, V1DaemonSet

from pkg.framework.reconcile.handler import Scratch
from pkg.gpucontroller.names import Component
from pkg.gpucontroller.orchestrator.render import RenderContext


@dataclass
class OrchestratorState(Scratch):
    config_map: V1ConfigMap
    owned: tuple[V1DaemonSet, ...]
    """The DaemonSets this ConfigMap's document rendered before (the DaemonSet cache, by label)."""
    context: RenderContext | None = None
    """Set by the parse step once the document is valid."""
    desired: dict[Component, V1DaemonSet] = field(default_factory=dict)
