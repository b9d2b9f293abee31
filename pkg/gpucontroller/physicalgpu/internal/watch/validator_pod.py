"""GPU validator Pod events -> the PhysicalGPUs on the Pod's node.

The validator's verdict is what ``DriverReady`` says. A Pod's status changes on every probe and
container event, most of which say nothing new about the driver: an update passes only when the
Pod moved to another node or its verdict changed. On an update both the old and the new node's
cards are woken (the framework maps both objects), so a Pod that moved leaves no card behind.
"""

from __future__ import annotations

from kubernetes.client import V1Pod

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.gpucontroller.physicalgpu.internal.indexes import pod_node
from pkg.gpucontroller.physicalgpu.internal.validator import pod_verdict
from pkg.gpucontroller.physicalgpu.internal.watch.gpus_on_node import gpus_on_node


def verdict_changed(old: V1Pod, new: V1Pod) -> bool:
    return pod_node(old) != pod_node(new) or pod_verdict(old) != pod_verdict(new)


def validator_pod_watch(gpus: Store[PhysicalGPU]) -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=verdict_changed, enqueuer=gpus_on_node(gpus, node_of=pod_node))
