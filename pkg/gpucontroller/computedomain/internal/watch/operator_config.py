"""The operator configuration ConfigMap -> every domain: the daemons are rendered from its
``computeDomains`` settings. Domains are few (one per multi-node job), so all are woken."""

from __future__ import annotations

from kubernetes.client import V1ConfigMap

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request


def data_changed(old: V1ConfigMap, new: V1ConfigMap) -> bool:
    return old.data != new.data


def operator_config_watch(domains: Store[ComputeDomain]) -> ObjectRefWatch:
    def every_domain(_config: V1ConfigMap) -> list[Request]:
        return [
            Request(name=str(d.metadata.name), namespace=str(d.metadata.namespace)) for d in domains.list()
        ]

    return ObjectRefWatch(update_filter=data_changed, enqueuer=every_domain)
