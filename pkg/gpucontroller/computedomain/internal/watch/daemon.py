"""Daemon Pod and ConfigMap events -> the domain they serve (their annotation).

A Pod matters when its address, readiness or deletion mark changes (the domain's status repeats
them, and a Pod gone may need replacing); a ConfigMap when its data changes (a hand edit is put
back) or it goes.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ConfigMap, V1Pod

from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.computedomain.internal.meta import meta
from pkg.gpucontroller.computedomain.render import ANNOTATION_DOMAIN


def domain_of(obj: V1Pod | V1ConfigMap) -> list[Request]:
    key = (obj.metadata.annotations or {}).get(ANNOTATION_DOMAIN, "") if obj.metadata else ""
    namespace, _, name = key.partition("/")
    return [Request(name=name, namespace=namespace)] if namespace and name else []


def pod_changed(old: V1Pod, new: V1Pod) -> bool:
    def shape(pod: V1Pod) -> tuple[Any, ...]:
        status = pod.status
        ready = [c.status for c in (status.conditions if status else None) or [] if c.type == "Ready"]
        return (status.pod_ip if status else None), ready, meta(pod).deletion_timestamp

    return shape(old) != shape(new)


def data_changed(old: V1ConfigMap, new: V1ConfigMap) -> bool:
    return old.data != new.data


def daemon_pod_watch() -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=pod_changed, enqueuer=domain_of)


def daemon_config_map_watch() -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=data_changed, enqueuer=domain_of)
