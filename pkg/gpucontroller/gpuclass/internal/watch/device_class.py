"""DeviceClass events -> the GPUClass of the same name.

A DeviceClass appearing, disappearing, or changing its spec (generation), labels or owners wakes
its GPUClass: a hand edit is put back, and a foreign class that went away frees the name. Its
other metadata churn does not change what the controller would write.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1DeviceClass

from pkg.framework.controller.enqueue import EnqueueRequestForObject
from pkg.framework.controller.object_ref import ObjectRefWatch


def device_class_changed(old: V1DeviceClass, new: V1DeviceClass) -> bool:
    def shape(dc: V1DeviceClass) -> tuple[Any, ...]:
        meta = dc.metadata
        owners = [o.uid for o in (meta.owner_references if meta else None) or []]
        return (meta.generation if meta else None), owners, (meta.labels if meta else None)

    return shape(old) != shape(new)


def device_class_watch() -> ObjectRefWatch:
    # A DeviceClass carries its GPUClass's name, so the request is the object's own.
    return ObjectRefWatch(update_filter=device_class_changed, enqueuer=EnqueueRequestForObject().requests_for)
