"""The read-only snapshot of one GPUClass reconcile, from the caches."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes.client import V1DeviceClass

from api.gpu.v1alpha1 import GPUClass, GPUClassStatus
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.handler import Snapshot

GPUClassResource = Resource[GPUClass, GPUClassStatus]


@dataclass(frozen=True)
class GPUClassState(Snapshot):
    resource: GPUClassResource
    existing: V1DeviceClass | None
    """The DeviceClass of the class's name, if any (whoever made it)."""
    uuids: tuple[str, ...] | None
    """The UUIDs of the cards ``spec.names`` lists that gpu-handler has read; ``None``: no names."""
    unresolved: tuple[str, ...] = ()
    """Names of ``spec.names`` with no known UUID yet (no such PhysicalGPU, or not read yet)."""

    @property
    def gpu_class(self) -> GPUClass:
        return self.resource.original

    @property
    def status(self) -> GPUClassStatus:
        return self.resource.status()
