"""The read-only snapshot a PhysicalGPU reconcile works on.

Built once per reconcile from the fetched resource and cache lookups, so handlers make decisions on
one consistent view and never reach for I/O themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU, PhysicalGPUStatus
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.handler import Snapshot

PhysicalGPUResource = Resource[PhysicalGPU, PhysicalGPUStatus]


@dataclass(frozen=True)
class PhysicalGPUState(Snapshot):
    resource: PhysicalGPUResource
    node_name: str | None
    node_exists: bool

    @property
    def gpu(self) -> PhysicalGPU:
        """The working copy handlers edit (its status and metadata are written back)."""
        return self.resource.changed()

    @property
    def status(self) -> PhysicalGPUStatus:
        return self.resource.status()

    @property
    def being_deleted(self) -> bool:
        return self.resource.original.metadata.deletion_timestamp is not None


def state_factory(node_exists: Callable[[str], bool]) -> Callable[[PhysicalGPUResource], PhysicalGPUState]:
    """A factory that looks the card's Node up in the cache through ``node_exists``."""

    def build(resource: PhysicalGPUResource) -> PhysicalGPUState:
        gpu = resource.original
        # The label value may be a shortened form of a long node name (label values stop at 63
        # characters); the status the node agent writes holds the full name.
        node_info = gpu.status.node_info if gpu.status else None
        node_name = (node_info.node_name if node_info else None) or (gpu.metadata.labels or {}).get(
            LABEL_NODE
        )
        return PhysicalGPUState(
            resource=resource,
            node_name=node_name,
            node_exists=node_name is not None and node_exists(node_name),
        )

    return build
