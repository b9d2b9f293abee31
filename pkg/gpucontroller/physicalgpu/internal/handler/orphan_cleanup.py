"""Deletes a PhysicalGPU whose Node is gone.

The node agent owns its node's PhysicalGPUs, but when a Node is removed from the cluster its agent
is gone too, and the objects would stay forever, still counted in metrics and dashboards. The
decision uses the informer cache, which the controller waits to sync before its first reconcile,
so an empty cache at start-up cannot be mistaken for "every node is gone".
"""

from __future__ import annotations

from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.physicalgpu.internal.service import GPUDeleter
from pkg.gpucontroller.physicalgpu.internal.state import PhysicalGPUState

REASON_NODE_GONE = "NodeGone"


class OrphanCleanupHandler:
    name = "orphan-cleanup"

    def __init__(self, *, deleter: GPUDeleter, recorder: EventRecorderLogger) -> None:
        self._deleter = deleter
        self._recorder = recorder

    def handle(self, state: PhysicalGPUState) -> Result | None:
        if state.being_deleted:
            raise StopHandlerChain(reason="being deleted")
        if state.node_name is None or state.node_exists:
            return None
        gpu = state.resource.original
        if self._deleter.delete(gpu):
            self._recorder.event(
                gpu,
                type_="Normal",
                reason=REASON_NODE_GONE,
                message=f"node {state.node_name} no longer exists; deleted its PhysicalGPU",
            )
        raise StopHandlerChain(reason=f"node {state.node_name} is gone")
