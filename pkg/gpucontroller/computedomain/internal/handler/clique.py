"""Step 5, clique: where the domain's claims go, chosen once and kept in ``status.nvlinkDomain``.

A pinned ``spec.nvlinkDomain`` is taken as it is, but reported NotReady while no node offers its
channels (a typo, or a rack not up yet). Unpinned, the clique offering the most nodes is chosen;
while no node offers channel devices at all there is nothing to choose from and no template is made.
Both wait with backoff (and a ResourceSlice change wakes the domain sooner).
"""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.clique import choose_clique
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import (
    REASON_NO_CHANNEL_DEVICES,
    REASON_NVLINK_DOMAIN_NOT_OFFERED,
    not_ready,
)


class CliqueHandler:
    name = "clique"

    def handle(self, state: ComputeDomainState) -> Result | None:
        pinned = state.domain.spec.nvlink_domain
        chosen = state.status.nvlink_domain or pinned or choose_clique(state.cliques)
        if chosen is None:
            raise not_ready(
                state,
                reason=REASON_NO_CHANNEL_DEVICES,
                message="no node offers IMEX channel devices (gpu.deckhouse.io/deviceType ImexChannel)",
            )
        if pinned is not None and pinned not in state.cliques:
            state.status.nvlink_domain = pinned
            raise not_ready(
                state,
                reason=REASON_NVLINK_DOMAIN_NOT_OFFERED,
                message=f"spec.nvlinkDomain {pinned} is offered by no node's IMEX channel devices",
            )
        state.status.nvlink_domain = chosen
        state.clique = chosen
        return None
