"""Store indexes the GPUClass controller reads, declared with the manager by its setup.

* :data:`GPU_CLASS_BY_NAMED_GPU_INDEX` (GPUClasses): a PhysicalGPU wakes the classes whose
  ``spec.names`` list it, found by lookup rather than by scanning every class.
"""

from __future__ import annotations

from typing import Any

from api.gpu.v1alpha1 import GPUClass
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.cache.indexer import Index

GPU_CLASS_BY_NAMED_GPU = "gpuclass-by-named-gpu"


def named_gpus(gpu_class: GPUClass) -> list[str]:
    """The PhysicalGPU names a GPUClass lists."""
    return list(gpu_class.spec.names or [])


GPU_CLASS_BY_NAMED_GPU_INDEX: Index[GPUClass] = Index(
    name=GPU_CLASS_BY_NAMED_GPU, kind=GPU_CLASS, func=named_gpus
)

INDEXES: tuple[Index[Any], ...] = (GPU_CLASS_BY_NAMED_GPU_INDEX,)
