"""ComputeDomain events -> the cliques it is pinned to. The framework hands an update's old and new
object to the enqueuer alike, so a domain leaving a clique (deleted, or its pin changed) wakes the
clique it left: the ensemble goes with its last domain."""

from __future__ import annotations

from api.gpu.v1alpha1 import ComputeDomain
from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request
from pkg.gpucontroller.imexensemble.indexes import domain_cliques


def cliques_changed(old: ComputeDomain, new: ComputeDomain) -> bool:
    return domain_cliques(old) != domain_cliques(new)


def domain_watch() -> ObjectRefWatch:
    return ObjectRefWatch(
        update_filter=cliques_changed,
        enqueuer=lambda domain: [Request(name=c) for c in domain_cliques(domain)],
    )
