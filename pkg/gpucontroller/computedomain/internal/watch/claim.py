"""ResourceClaim events -> the domain its channel config names (in the claim's namespace).

Only an allocation appearing, changing or going away changes membership (and a deleted domain waits
for exactly that); other updates of a claim do not.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ResourceV1ResourceClaim

from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.computedomain.internal.membership import spec_channel_config
from pkg.gpucontroller.computedomain.internal.meta import meta


def allocation_changed(old: ResourceV1ResourceClaim, new: ResourceV1ResourceClaim) -> bool:
    def allocation(claim: ResourceV1ResourceClaim) -> Any:
        found = claim.status.allocation if claim.status else None
        return found.to_dict() if found is not None else None

    return bool(allocation(old) != allocation(new))


def domain_of(claim: ResourceV1ResourceClaim) -> list[Request]:
    config = spec_channel_config(claim)
    return [Request(name=config.domain, namespace=str(meta(claim).namespace))] if config else []


def claim_watch() -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=allocation_changed, enqueuer=domain_of)
