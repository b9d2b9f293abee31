"""The read-only snapshot a PhysicalGPU reconcile works on.

Built once per reconcile from the fetched resource and cache lookups, so handlers make decisions on
one consistent view and never reach for I/O themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubernetes.client import V1Pod

from api.gpu.v1alpha1 import (
    LABEL_NODE,
    LABEL_VENDOR,
    PhysicalGPU,
    PhysicalGPUConditionType,
    PhysicalGPUStatus,
)
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.conditions import ConditionStatus, condition_status
from pkg.framework.reconcile.handler import Snapshot
from pkg.gpucontroller.names import NVIDIA_VENDOR

PhysicalGPUResource = Resource[PhysicalGPU, PhysicalGPUStatus]


@dataclass(frozen=True)
class PhysicalGPUState(Snapshot):
    resource: PhysicalGPUResource
    node_name: str | None
    node_exists: bool
    validator_pods: tuple[V1Pod, ...] = ()
    """The GPU validator's Pods on the card's node (from the Pod cache, by node)."""
    driver_ready_before: ConditionStatus = ConditionStatus.UNKNOWN
    """DriverReady as fetched, so a transition can be told after the write."""

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

    @property
    def validated_by_validator(self) -> bool:
        """Whether the GPU validator judges this card: NVIDIA's validator checks NVIDIA cards."""
        return (self.resource.original.metadata.labels or {}).get(LABEL_VENDOR) == NVIDIA_VENDOR


def _no_pods(_node: str) -> Sequence[V1Pod]:
    return ()


def state_factory(
    node_exists: Callable[[str], bool],
    validator_pods: Callable[[str], Sequence[V1Pod]] = _no_pods,
) -> Callable[[PhysicalGPUResource], PhysicalGPUState]:
    """A factory that looks the card's Node up in the cache through ``node_exists``, and the
    validator Pods on that node through ``validator_pods``."""

    def build(resource: PhysicalGPUResource) -> PhysicalGPUState:
        gpu = resource.original
        # The label value may be a shortened form of a long node name (label values stop at 63
        # characters); the status the node agent writes holds the full name.
        node_info = gpu.status.node_info if gpu.status else None
        node_name = (node_info.node_name if node_info else None) or (gpu.metadata.labels or {}).get(
            LABEL_NODE
        )
        conditions = gpu.status.conditions if gpu.status else None
        return PhysicalGPUState(
            resource=resource,
            node_name=node_name,
            node_exists=node_name is not None and node_exists(node_name),
            validator_pods=tuple(validator_pods(node_name)) if node_name else (),
            driver_ready_before=condition_status(conditions, PhysicalGPUConditionType.DRIVER_READY),
        )

    return build
