"""Step 2, prune: delete the DaemonSets of components the document no longer enables.

Only DaemonSets labelled as rendered from this ConfigMap are considered (the cache holds nothing
else), and each is deleted with a uid precondition, so a same-named successor survives. Pruning
runs before applying, so a component switched off goes even while another one fails to apply.
"""

from __future__ import annotations

from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.names import LABEL_COMPONENT
from pkg.gpucontroller.orchestrator.internal.service import DaemonSetWriter
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState

REASON_PRUNED = "DaemonSetPruned"


class PruneHandler:
    name = "prune"

    def __init__(self, *, writer: DaemonSetWriter, recorder: EventRecorderLogger) -> None:
        self._writer = writer
        self._recorder = recorder

    def handle(self, state: OrchestratorState) -> Result | None:
        wanted = {component.value for component in state.desired}
        for daemon_set in state.owned:
            meta = daemon_set.metadata
            component = (meta.labels or {}).get(LABEL_COMPONENT) if meta else None
            if component in wanted or meta is None:
                continue
            if self._writer.delete(daemon_set):
                self._recorder.event(
                    state.config_map,
                    type_="Normal",
                    reason=REASON_PRUNED,
                    message=f"deleted DaemonSet {meta.name}: {component} is no longer enabled",
                    kind=CONFIG_MAP,
                )
        return None
