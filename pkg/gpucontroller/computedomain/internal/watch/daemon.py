"""Ensemble Pod and ConfigMap events -> the domains pinned to their clique (the annotation, then the
domains-by-clique index).

A Pod matters when its address, readiness or deletion mark changes (the domains' ``status.nodes``
repeat them); the ConfigMap when its data changes (members joined or left: indexes) or it goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.client import V1ConfigMap, V1Pod

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.imexensemble.indexes import DOMAIN_BY_CLIQUE
from pkg.gpucontroller.imexensemble.render import clique_of, pod_address, pod_ready


def _domains_of(domains: Store[ComputeDomain]) -> Callable[[V1Pod | V1ConfigMap], list[Request]]:
    def mapped(obj: V1Pod | V1ConfigMap) -> list[Request]:
        clique = clique_of(obj)
        pinned = domains.by_index(DOMAIN_BY_CLIQUE, clique) if clique else []
        return sorted(Request(name=str(d.metadata.name), namespace=str(d.metadata.namespace)) for d in pinned)

    return mapped


def pod_changed(old: V1Pod, new: V1Pod) -> bool:
    def shape(pod: V1Pod) -> tuple[Any, ...]:
        deleting = pod.metadata.deletion_timestamp if pod.metadata else None
        return pod_address(pod), pod_ready(pod), deleting

    return shape(old) != shape(new)


def data_changed(old: V1ConfigMap, new: V1ConfigMap) -> bool:
    return old.data != new.data


def daemon_pod_watch(domains: Store[ComputeDomain]) -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=pod_changed, enqueuer=_domains_of(domains))


def daemon_config_map_watch(domains: Store[ComputeDomain]) -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=data_changed, enqueuer=_domains_of(domains))
