"""A GPUClass's own events: creates and deletes, and an update only when its generation changed.

The controller writes the GPUClass status; without this filter every status write would wake the
class again for a pass that finds nothing to do.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import GPUClass
from pkg.framework.controller.predicate import Funcs, Predicate


def generation_changed(old: GPUClass, new: GPUClass) -> bool:
    return old.metadata.generation != new.metadata.generation


def gpu_class_events() -> Predicate:
    return Funcs(update=generation_changed)
