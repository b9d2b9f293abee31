"""The state of one ComputeDomain pass: what the caches say, filled in chain order with what the
handlers decide (the clique, the membership)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass, V1Pod, V1ResourceClaimTemplate

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainStatus
from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.handler import Scratch
from pkg.gpucontroller.imexensemble.settings import DaemonSettings

ComputeDomainResource = Resource[ComputeDomain, ComputeDomainStatus]


@dataclass(frozen=True)
class Ensemble:
    """A clique's IMEX ensemble as the caches hold it: the stable indexes of its members (its
    ConfigMap's ``members.json``) and each member's current daemon Pod (of the current nodes hash)."""

    clique: str | None = None
    members: dict[str, int] = field(default_factory=dict)
    pods: dict[str, V1Pod] = field(default_factory=dict)


@dataclass
class ComputeDomainState(Scratch):
    resource: ComputeDomainResource
    daemons: DaemonSettings
    components_namespace: str
    device_class: V1DeviceClass | None
    """The channel DeviceClass as cached (whoever made it)."""
    template: V1ResourceClaimTemplate | None
    """The template of the domain's ``spec.channel.resourceClaimTemplate.name``, whoever made it."""
    claims: tuple[ResourceV1ResourceClaim, ...]
    """The claims of the domain's namespace that name it (by UID) in their channel config."""
    cliques: dict[str, set[str]]
    """Each NVLink clique offering channel devices, with its nodes."""
    ensemble: Ensemble
    """The IMEX ensemble of the clique the domain was pinned to when the pass began."""
    live_domains: frozenset[str]
    """UIDs of the domains that exist: ledger entries of others are free."""
    channels_in_use: frozenset[int]
    """The channels other domains' statuses hold."""
    clique: str | None = None
    nodes: list[DomainNode] = field(default_factory=list)
    """The membership the pass settled on (set by the membership step)."""

    @property
    def domain(self) -> ComputeDomain:
        return self.resource.original

    @property
    def status(self) -> ComputeDomainStatus:
        return self.resource.status()

    @property
    def name(self) -> str:
        return f"{self.domain.metadata.namespace}/{self.domain.metadata.name}"
