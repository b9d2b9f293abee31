"""ResourceSlice events -> the cliques of the channel devices it offers. The old slice of an update
is mapped too, so a node that stops offering a clique's channels wakes that clique (it leaves the
ensemble), not only the one it offers now."""

from __future__ import annotations

from kubernetes.client import V1ResourceSlice

from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.imexensemble.indexes import slice_cliques


def cliques_changed(old: V1ResourceSlice, new: V1ResourceSlice) -> bool:
    return slice_cliques(old) != slice_cliques(new)


def slice_watch() -> ObjectRefWatch:
    return ObjectRefWatch(
        update_filter=cliques_changed,
        enqueuer=lambda resource_slice: [Request(name=c) for c in slice_cliques(resource_slice)],
    )
