"""One allocation attempt as a value: what the allocator decided from (:class:`AllocationInputs`)
and what it decided (:class:`AllocationAttempt`).

The inputs are frozen copies taken when the attempt ran, so whoever wants to know *why* the
allocator decided as it did (an ``AllocationFailed`` Event, the explain CLI) diagnoses the attempt
that was taken (:func:`~pkg.dra.allocator.explain.explain`) instead of allocating a second time
from a view of the cluster that may have changed in between.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceClass,
    V1Node,
    V1ResourceSlice,
)

from pkg.dra.model import Unschedulable


def _class_index(
    classes: Iterable[V1DeviceClass] | Mapping[str, V1DeviceClass],
) -> Mapping[str, V1DeviceClass]:
    """DeviceClasses by name (a mapping is taken as it is)."""
    if isinstance(classes, Mapping):
        return classes
    return {c.metadata.name: c for c in classes if c.metadata is not None and c.metadata.name}


@dataclass(frozen=True, slots=True)
class AllocationInputs:
    """Everything one allocation decides from.

    ``allocated_claims``: the claims already allocated (the claim being allocated among them is
    ignored); ``namespace_labels``: the labels of the claim's namespace (admin access needs
    ``resource.kubernetes.io/admin-access: "true"``; None when unknown); ``node``: allocate on this
    node only (None: on any one node).
    """

    slices: tuple[V1ResourceSlice, ...]
    classes: Mapping[str, V1DeviceClass]
    allocated_claims: tuple[ResourceV1ResourceClaim, ...]
    namespace_labels: Mapping[str, str] | None = None
    node: V1Node | None = None

    @classmethod
    def of(
        cls,
        *,
        slices: Iterable[V1ResourceSlice],
        classes: Iterable[V1DeviceClass] | Mapping[str, V1DeviceClass],
        allocated_claims: Iterable[ResourceV1ResourceClaim],
        namespace_labels: Mapping[str, str] | None = None,
        node: V1Node | None = None,
    ) -> AllocationInputs:
        """Inputs from any iterables (copied, so later changes to them do not reach the attempt)."""
        return cls(
            slices=tuple(slices),
            classes=dict(_class_index(classes)),
            allocated_claims=tuple(allocated_claims),
            namespace_labels=None if namespace_labels is None else dict(namespace_labels),
            node=node,
        )


@dataclass(frozen=True, slots=True)
class AllocationAttempt:
    """The decision the allocator took for ``claim`` from ``inputs``: the ``status.allocation`` to
    write, or why the claim cannot be allocated."""

    claim: ResourceV1ResourceClaim
    inputs: AllocationInputs
    outcome: V1AllocationResult | Unschedulable


__all__ = ["AllocationAttempt", "AllocationInputs"]
