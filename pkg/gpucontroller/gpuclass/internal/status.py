"""The class's status as the handlers leave it, and the Events that mark its changes.

An Event is recorded when ``valid`` or the message changes against what the class stored, so a
pass that restates the same verdict adds nothing (and a retried conflict is folded into the first
Event's series by the recorder).
"""

from __future__ import annotations

from api.gpu.v1alpha1 import Generated
from pkg.domain.kinds import GPU_CLASS
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState

REASON_INVALID = "InvalidGPUClass"
REASON_VALID = "GPUClassValid"


def report(
    state: GPUClassState,
    recorder: EventRecorderLogger,
    *,
    valid: bool,
    message: str,
    generated: Generated | None = None,
) -> None:
    """Writes the verdict into the working copy's status; records an Event when it changed."""
    stored = state.gpu_class.status
    before = (stored.valid, stored.message) if stored else (None, None)
    status = state.status
    status.valid = valid
    status.message = message
    if generated is not None or not valid:
        status.generated = generated if generated is not None else status.generated
    if before != (valid, message):
        recorder.event(
            state.gpu_class,
            type_="Normal" if valid else "Warning",
            reason=REASON_VALID if valid else REASON_INVALID,
            message=message,
            kind=GPU_CLASS,
        )
