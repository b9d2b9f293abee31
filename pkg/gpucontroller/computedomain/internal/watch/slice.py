"""ResourceSlice events -> the domains still waiting for a clique (no ``status.nvlinkDomain`` yet,
also while a pinned one is offered by nobody). A chosen clique never changes, so the others are not
woken."""

from __future__ import annotations

from kubernetes.client import V1ResourceSlice

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.computedomain.internal.meta import meta


def generation_changed(old: V1ResourceSlice, new: V1ResourceSlice) -> bool:
    return meta(old).generation != meta(new).generation


def waiting_for_clique(domain: ComputeDomain) -> bool:
    return domain.status is None or domain.status.nvlink_domain is None


def slice_watch(domains: Store[ComputeDomain]) -> ObjectRefWatch:
    def waiting(_slice: V1ResourceSlice) -> list[Request]:
        return [
            Request(name=str(d.metadata.name), namespace=str(d.metadata.namespace))
            for d in domains.list()
            if waiting_for_clique(d)
        ]

    return ObjectRefWatch(update_filter=generation_changed, enqueuer=waiting)
