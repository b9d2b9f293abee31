"""Step 4, pods: one IMEX daemon Pod per member, of the current nodes hash.

A Pod of another hash (the members changed: IMEX reads its nodes file only at start) or of a node
that left is deleted, and the current one is created beside it (the hash is in the name). Addresses
are not in the hash: a restarted daemon's new address reaches its peers through ``hosts``.
"""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.imexensemble.internal.errors import require_settings
from pkg.gpucontroller.imexensemble.internal.service import EnsembleApi
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.render import daemon_pod, daemon_pod_name, members_hash


class PodsHandler:
    name = "pods"

    def __init__(self, *, api: EnsembleApi) -> None:
        self._api = api

    def handle(self, state: EnsembleState) -> Result | None:
        settings = require_settings(state)
        hashed = members_hash(state.members, settings.port)
        wanted = {daemon_pod_name(state.clique, index, hashed): node for node, index in state.members.items()}
        present: set[str] = set()
        for pod in state.pods:
            metadata = pod.metadata
            name = metadata.name if metadata is not None else None
            node = wanted.get(name or "")
            if node is not None and pod.spec is not None and pod.spec.node_name == node:
                present.add(str(name))
            elif metadata is not None and metadata.deletion_timestamp is None:
                self._api.delete_pod(pod)
        for name, node in wanted.items():
            if name not in present:
                self._api.create_pod(
                    daemon_pod(
                        state.clique,
                        node,
                        members=state.members,
                        namespace=state.namespace,
                        settings=settings,
                        driver_root=state.daemons.driver_root,
                    )
                )
        return None
