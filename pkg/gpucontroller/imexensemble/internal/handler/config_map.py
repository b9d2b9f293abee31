"""Step 3, config map: the ensemble's files for the current members, and the addresses of their
current daemon Pods (a member whose Pod has no address yet is left out of ``hosts``).

Written only when it differs from what is cached; an address change rewrites only ``hosts``, which
the running daemons re-read, so nothing restarts for it.
"""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.imexensemble.internal.errors import require_settings
from pkg.gpucontroller.imexensemble.internal.service import EnsembleApi
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.render import current_pods, ensemble_config_map, members_hash, pod_address


class ConfigMapHandler:
    name = "config-map"

    def __init__(self, *, api: EnsembleApi) -> None:
        self._api = api

    def handle(self, state: EnsembleState) -> Result | None:
        settings = require_settings(state)
        pods = current_pods(state.pods, members_hash(state.members, settings.port))
        addresses = {
            node: address for node in state.members if (address := pod_address(pods.get(node))) is not None
        }
        wanted = ensemble_config_map(
            state.clique, state.members, addresses, namespace=state.namespace, port=settings.port
        )
        found = state.config_map
        same = (
            found is not None
            and found.data == wanted.data
            and found.metadata is not None
            and (found.metadata.annotations or {}) == (wanted.metadata.annotations or {})  # type: ignore[union-attr]
        )
        if not same:
            self._api.apply_config_map(wanted)
        return None
