"""The state of one ensemble pass (one clique): what the caches say, and the members the pass settles on."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.client import V1ConfigMap, V1Pod

from pkg.framework.reconcile.handler import Scratch
from pkg.gpucontroller.imexensemble.settings import DaemonSettings


@dataclass
class EnsembleState(Scratch):
    clique: str
    domains: tuple[str, ...]
    """``namespace/name`` of the ComputeDomains pinned to the clique (the ensemble lives while any does)."""
    nodes: frozenset[str]
    """The nodes whose ResourceSlices offer the clique's IMEX channel devices."""
    daemons: DaemonSettings
    namespace: str
    """The node components' namespace, where the ensemble lives."""
    pods: tuple[V1Pod, ...]
    """The ensemble's daemon Pods (by the clique hash label)."""
    config_map: V1ConfigMap | None
    members: dict[str, int] = field(default_factory=dict)
    """node -> stable index, as the members step settles it."""
