"""ResourceClaimTemplate events -> the domain that owns it, and the domains naming it.

An owned template edited or deleted by hand is put back; a foreign template of the name a domain
wants going away lets the domain make its own.
"""

from __future__ import annotations

from kubernetes.client import V1ResourceClaimTemplate

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_KIND, ComputeDomain
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.framework.reconcile.owner_references import controller_of
from pkg.gpucontroller.computedomain.internal.indexes import DOMAIN_BY_TEMPLATE
from pkg.gpucontroller.computedomain.internal.meta import meta


def spec_changed(old: V1ResourceClaimTemplate, new: V1ResourceClaimTemplate) -> bool:
    return meta(old).generation != meta(new).generation


def template_watch(domains: Store[ComputeDomain]) -> ObjectRefWatch:
    def referrers(template: V1ResourceClaimTemplate) -> list[Request]:
        namespace = str(meta(template).namespace)
        named = domains.by_index(DOMAIN_BY_TEMPLATE, f"{namespace}/{meta(template).name}")
        requests = {Request(name=str(d.metadata.name), namespace=namespace) for d in named}
        owner = controller_of(meta(template))
        if owner is not None and owner.kind == COMPUTE_DOMAIN_KIND:
            requests.add(Request(name=owner.name, namespace=namespace))
        return sorted(requests)

    return ObjectRefWatch(update_filter=spec_changed, enqueuer=referrers)
