"""Step 1, removal: a clique no ComputeDomain is pinned to has no ensemble.

The domain's finalizer keeps it until none of its claims is allocated, so a clique's last domain
going away means no job of the clique uses IMEX any more: the daemons and the ConfigMap go.
"""

from __future__ import annotations

from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.imexensemble.internal.service import EnsembleApi
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState


class RemovalHandler:
    name = "removal"

    def __init__(self, *, api: EnsembleApi) -> None:
        self._api = api

    def handle(self, state: EnsembleState) -> Result | None:
        if state.domains:
            return None
        for pod in state.pods:
            if pod.metadata is None or pod.metadata.deletion_timestamp is None:
                self._api.delete_pod(pod)
        if state.config_map is not None:
            self._api.delete_config_map(state.config_map)
        raise StopHandlerChain(reason="no domain is pinned to the clique")
