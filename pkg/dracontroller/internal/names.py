"""The names the allocation controller reads and writes on ResourceClaims, in one place.

Why the finalizer is the scheduler's and not one of ours: kube-controller-manager's resourceclaim
controller (``syncClaim``) releases an allocation only on claims carrying
``resource.kubernetes.io/delete-protection``: when such a claim is being deleted and no consumer
reserves it, it clears ``status.allocation`` and removes the finalizer; when its last consumer
goes away, it clears the allocation. A claim allocated without that finalizer would neither be
protected from deletion while a Pod uses it nor be released by anyone. So, exactly as the
scheduler's ``bindClaim`` does, the finalizer is added by a normal update first, then
``status.allocation`` is written. A finalizer of our own would add nothing but a way to make
claims undeletable while this controller is down.

Which allocations are ours is recorded in :data:`ALLOCATED_BY`: collision handling only ever
takes back an allocation this controller made.
"""

from __future__ import annotations

DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
"""``resourceapi.Finalizer``: the scheduler adds it before writing an allocation."""

ALLOCATED_BY = "gpu.deckhouse.io/allocated-by"
ALLOCATED_BY_US = "gpu-dra-controller"

EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
"""Set by the scheduler on the special claims it creates for extended resources (KEP-5004)."""

# Event reasons.
REASON_ALLOCATED = "Allocated"
REASON_ALLOCATION_FAILED = "AllocationFailed"
REASON_REALLOCATING = "Reallocating"
REASON_LEFT_TO_SCHEDULER = "LeftToScheduler"

CONTROLLER_NAME = "resourceclaim-allocator"
