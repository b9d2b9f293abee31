"""Step 8, ensemble: each member node's entry as its clique's IMEX ensemble has it.

The daemons are not the domain's: the ensemble controller runs one per node of the clique, shared
by every domain pinned to it. Here each member node gets its index in that ensemble and the address
and readiness of its current daemon Pod. A member node the ensemble does not have (it stopped
offering the clique's channels, or the ensemble is not written yet) has no index and is not ready;
the ready step says why.
"""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import REASON_NO_DAEMON_SETTINGS, not_ready
from pkg.gpucontroller.imexensemble.render import pod_address, pod_ready


class EnsembleHandler:
    name = "ensemble"

    def handle(self, state: ComputeDomainState) -> Result | None:
        if state.daemons.settings is None:
            raise not_ready(state, reason=REASON_NO_DAEMON_SETTINGS, message=str(state.daemons.problem))
        ensemble = state.ensemble if state.ensemble.clique == state.clique else None
        for node in state.nodes:
            index = ensemble.members.get(node.name) if ensemble is not None else None
            pod = ensemble.pods.get(node.name) if ensemble is not None and index is not None else None
            node.index = index
            node.address = pod_address(pod)
            node.ready = pod_ready(pod)
        state.status.nodes = state.nodes
        return None
