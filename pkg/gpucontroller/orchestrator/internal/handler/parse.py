"""Step 1, parse: the document, then the DaemonSets it renders.

A document that does not parse stops the pass before anything is written: the DaemonSets stay as
the last valid document left them, and a Warning Event on the ConfigMap says why (correlated by the
recorder, so an unchanged broken document does not add Events). The pass is not retried: only a
new version of the ConfigMap can fix it, and that wakes the controller.
"""

from __future__ import annotations

from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.reconcile import StopHandlerChain
from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.orchestrator.internal.config import InvalidConfigError, parse_config
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState
from pkg.gpucontroller.orchestrator.render import RenderContext, render_all

REASON_INVALID = "InvalidConfig"


class ParseHandler:
    name = "parse"

    def __init__(self, *, recorder: EventRecorderLogger) -> None:
        self._recorder = recorder

    def handle(self, state: OrchestratorState) -> Result | None:
        try:
            spec = parse_config(state.config_map)
        except InvalidConfigError as exc:
            self._recorder.event(
                state.config_map, type_="Warning", reason=REASON_INVALID, message=str(exc), kind=CONFIG_MAP
            )
            raise StopHandlerChain(reason="invalid configuration") from None
        state.context = RenderContext(config_map=state.config_map, spec=spec)
        state.desired = render_all(state.context)
        return None
