"""Step 5, clique: where the domain's claims go, chosen once and kept in ``status.nvlinkDomain``.

A pinned ``spec.nvlinkDomain`` is taken once some node offers its channels; until then the domain
is NotReady naming it (a typo, or a rack not up yet). Once recorded, the clique is kept even while
its nodes withdraw their offers for a while: the members' daemons are still managed. Unpinned, the
clique offering the most nodes is chosen; while no node offers channel devices at all there is
nothing to choose from and no template is made.
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
        chosen = state.status.nvlink_domain  # once recorded, kept: claims already select it
        pinned = state.domain.spec.nvlink_domain
        if chosen is None and pinned is not None:
            if pinned not in state.cliques:
                raise not_ready(
                    state,
                    reason=REASON_NVLINK_DOMAIN_NOT_OFFERED,
                    message=f"spec.nvlinkDomain {pinned} is offered by no node's IMEX channel devices",
                )
            chosen = pinned
        if chosen is None:
            chosen = choose_clique(state.cliques)
        if chosen is None:
            raise not_ready(
                state,
                reason=REASON_NO_CHANNEL_DEVICES,
                message="no node offers IMEX channel devices (gpu.deckhouse.io/deviceType ImexChannel)",
            )
        state.status.nvlink_domain = chosen
        state.clique = chosen
        return None
