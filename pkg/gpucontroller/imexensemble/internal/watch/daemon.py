"""The ensemble's Pod and ConfigMap events -> their clique (annotation).

A Pod matters when its address, readiness or deletion mark changes (``hosts`` lists the addresses,
and a Pod gone needs replacing); the ConfigMap when its data changes (a hand edit is put back) or it
goes.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ConfigMap, V1Pod

from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.imexensemble.render import clique_of, pod_address, pod_ready


def _clique(obj: V1Pod | V1ConfigMap) -> list[Request]:
    clique = clique_of(obj)
    return [Request(name=clique)] if clique else []


def pod_changed(old: V1Pod, new: V1Pod) -> bool:
    def shape(pod: V1Pod) -> tuple[Any, ...]:
        deleting = pod.metadata.deletion_timestamp if pod.metadata else None
        return pod_address(pod), pod_ready(pod), deleting

    return shape(old) != shape(new)


def data_changed(old: V1ConfigMap, new: V1ConfigMap) -> bool:
    return old.data != new.data


def ensemble_pod_watch() -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=pod_changed, enqueuer=_clique)


def ensemble_config_map_watch() -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=data_changed, enqueuer=_clique)
