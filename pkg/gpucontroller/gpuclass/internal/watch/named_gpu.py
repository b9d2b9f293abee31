"""PhysicalGPU events -> the GPUClasses whose ``spec.names`` list the card.

The DeviceClass selector lists the named cards by UUID, so a listed card appearing, disappearing
or changing its UUID wakes the classes naming it (an index lookup); nothing else about a card
matters to a class.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import GPUClass, PhysicalGPU
from pkg.framework.cache.store import Store
from pkg.framework.controller.object_ref import ObjectRefWatch, ReferrersOf
from pkg.framework.reconcile import Request
from pkg.gpucontroller.gpuclass.internal.gpu_uuid import gpu_uuid
from pkg.gpucontroller.gpuclass.internal.indexes import GPU_CLASS_BY_NAMED_GPU


def uuid_changed(old: PhysicalGPU, new: PhysicalGPU) -> bool:
    return gpu_uuid(old) != gpu_uuid(new)


def classes_naming(classes: Store[GPUClass]) -> ReferrersOf:
    def requests(gpu: PhysicalGPU) -> list[Request]:
        named = classes.by_index(GPU_CLASS_BY_NAMED_GPU, str(gpu.metadata.name))
        return [Request(name=str(c.metadata.name)) for c in named]

    return requests


def named_gpu_watch(classes: Store[GPUClass]) -> ObjectRefWatch:
    return ObjectRefWatch(update_filter=uuid_changed, enqueuer=classes_naming(classes))
