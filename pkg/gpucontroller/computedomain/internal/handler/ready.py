"""Step 9, ready: the domain is Ready when it has members, every member node is in its clique's
IMEX ensemble and every member's daemon is ready."""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import (
    REASON_DAEMONS_NOT_READY,
    REASON_NO_MEMBERS,
    REASON_NOT_IN_ENSEMBLE,
    REASON_READY,
    report,
)


class ReadyHandler:
    name = "ready"

    def handle(self, state: ComputeDomainState) -> Result | None:
        nodes = state.nodes
        waiting = sorted(n.name for n in nodes if not n.ready)
        outside = sorted(n.name for n in nodes if n.index is None)
        if not nodes:
            report(
                state,
                ready=False,
                reason=REASON_NO_MEMBERS,
                message="no claim of the domain is allocated yet",
            )
        elif outside:
            report(
                state,
                ready=False,
                reason=REASON_NOT_IN_ENSEMBLE,
                message=f"{len(outside)} of {len(nodes)} nodes are not in the IMEX ensemble of NVLink "
                f"clique {state.clique} (they do not offer its channels, or it is not written yet): "
                + ", ".join(outside),
            )
        elif waiting:
            names = ", ".join(waiting)
            report(
                state,
                ready=False,
                reason=REASON_DAEMONS_NOT_READY,
                message=f"IMEX daemons not ready on {len(waiting)} of {len(nodes)} nodes: {names}",
            )
        else:
            report(
                state, ready=True, reason=REASON_READY, message=f"IMEX daemons ready on {len(nodes)} nodes"
            )
        return None
