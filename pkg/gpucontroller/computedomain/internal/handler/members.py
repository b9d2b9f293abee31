"""Step 7, members: the nodes of the domain's allocated claims (their indexes are the clique
ensemble's, filled in by the ensemble step).

``lastMembershipChange`` moves when a node joins or leaves; an address or readiness change is not
a membership change.
"""

from __future__ import annotations

from pkg.framework.reconcile.conditions import now_utc
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.membership import member_entries, member_nodes
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState


class MembersHandler:
    name = "members"

    def handle(self, state: ComputeDomainState) -> Result | None:
        status = state.status
        previous = list(status.nodes or [])
        nodes = member_entries(previous, member_nodes(state.claims, str(state.domain.metadata.uid)))
        if {n.name for n in nodes} != {n.name for n in previous}:
            status.last_membership_change = now_utc()
        state.nodes = nodes
        status.nodes = nodes
        return None
