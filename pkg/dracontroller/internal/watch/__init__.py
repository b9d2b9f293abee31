"""Watches of the allocation controller besides its own claims, one per file: which events wake
which claims."""

from pkg.dracontroller.internal.watch.allocation_landed import allocation_landed_watch
from pkg.dracontroller.internal.watch.capacity_freed import capacity_freed_watch
from pkg.dracontroller.internal.watch.class_watch import class_watch
from pkg.dracontroller.internal.watch.namespace_watch import namespace_watch
from pkg.dracontroller.internal.watch.pod_watch import pod_watch
from pkg.dracontroller.internal.watch.slice_watch import slice_watch

__all__ = [
    "allocation_landed_watch",
    "capacity_freed_watch",
    "class_watch",
    "namespace_watch",
    "pod_watch",
    "slice_watch",
]
