"""Step 3, apply: server-side apply every rendered DaemonSet.

Every pass restates the whole intent (an apply owns exactly what it sends, so a field gpu-controller
stops rendering is removed, and a field edited by hand is taken back). The server changes nothing
for an identical intent: no new generation, no rollout. An Event on the ConfigMap tells when a
DaemonSet was created or its spec changed (its generation moved), never for a pass that changed
nothing.

A DaemonSet the API server refuses is a Warning Event naming it and the server's message; the
others are still applied, and the pass then fails so the controller retries with backoff.
"""

from __future__ import annotations

from pkg.framework.client import ApiError
from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.orchestrator.internal.service import DaemonSetWriter
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState

REASON_APPLIED = "DaemonSetApplied"
REASON_REJECTED = "DaemonSetRejected"


class ApplyError(RuntimeError):
    """Some DaemonSets could not be applied; the message names each with the server's reason."""


class ApplyHandler:
    name = "apply"

    def __init__(self, *, writer: DaemonSetWriter, recorder: EventRecorderLogger) -> None:
        self._writer = writer
        self._recorder = recorder

    def handle(self, state: OrchestratorState) -> Result | None:
        generations: dict[str, int | None] = {
            str(ds.metadata.name): ds.metadata.generation for ds in state.owned if ds.metadata is not None
        }
        failures = []
        for daemon_set in state.desired.values():
            name = str(daemon_set.metadata.name) if daemon_set.metadata else "?"
            try:
                if name not in generations:  # not in the cache yet, or really new
                    generations[name] = self._writer.generation(daemon_set)
                stored = self._writer.apply(daemon_set)
            except ApiError as exc:
                failures.append(f"DaemonSet {name}: {exc}")
                self._event("Warning", REASON_REJECTED, f"DaemonSet {name} was not applied: {exc}", state)
                continue
            generation = stored.metadata.generation if stored.metadata else None
            if generations[name] is None:
                self._event("Normal", REASON_APPLIED, f"created DaemonSet {name}", state)
            elif generation != generations[name]:
                self._event(
                    "Normal", REASON_APPLIED, f"updated DaemonSet {name} (generation {generation})", state
                )
        if failures:
            raise ApplyError("; ".join(failures))
        return None

    def _event(self, type_: str, reason: str, message: str, state: OrchestratorState) -> None:
        self._recorder.event(
            state.config_map,
            type_="Warning" if type_ == "Warning" else "Normal",
            reason=reason,
            message=message,
            kind=CONFIG_MAP,
        )
