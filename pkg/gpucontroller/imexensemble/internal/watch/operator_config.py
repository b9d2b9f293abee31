"""The operator configuration ConfigMap -> every clique a domain is pinned to: the daemons are
rendered from its ``computeDomains`` settings. Cliques are few (one per NVLink rack in use)."""

from __future__ import annotations

from kubernetes.client import V1ConfigMap

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.imexensemble.indexes import domain_cliques


def data_changed(old: V1ConfigMap, new: V1ConfigMap) -> bool:
    return old.data != new.data


def operator_config_watch(domains: Store[ComputeDomain]) -> ObjectRefWatch:
    def every_clique(_config: V1ConfigMap) -> list[Request]:
        return sorted({Request(name=c) for d in domains.list() for c in domain_cliques(d)})

    return ObjectRefWatch(update_filter=data_changed, enqueuer=every_clique)
