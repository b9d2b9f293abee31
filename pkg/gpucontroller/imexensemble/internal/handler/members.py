"""Step 2, members: the clique's nodes that offer its channels, each with its stable index.

Indexes are read back from the ensemble's ConfigMap (``members.json``) each pass: a staying node
keeps its index, a new node gets the lowest free one, a node that left frees its own. Job churn
never changes this set; only a node joining or leaving the clique does.
"""

from __future__ import annotations

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.render import assign_indexes, read_members


class MembersHandler:
    name = "members"

    def handle(self, state: EnsembleState) -> Result | None:
        state.members = assign_indexes(read_members(state.config_map), set(state.nodes))
        return None
