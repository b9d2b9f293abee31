"""Fault injection: die with SIGKILL at a named point of a pipeline, to prove crash safety.

``GPU_HANDLER_CRASH_AT=<pipeline>:<step>:<before|after>`` (e.g. ``prepare:prepare-devices:after``)
makes the process kill itself there, as a node losing power or an OOM kill would: no ``finally``,
no rollback, no flush. Tests set it for one run of the gpu-handler, let the kubelet call, restart
the handler without it, and check that the retry converges (one MIG device per claim, no stray
CDI file, a consistent checkpoint). Unset, the wrappers are not installed at all.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pkg.framework.steptaker import Rollbackable, Step, StepOutcome

logger = logging.getLogger(__name__)

CRASH_AT_ENV: Final = "GPU_HANDLER_CRASH_AT"


def _die(point: str) -> None:
    logger.warning("crashing on purpose at %s (%s)", point, CRASH_AT_ENV)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class CrashPoint:
    """Wraps one step; kills the process before or after its ``take``."""

    def __init__(self, step: Step[Any], *, pipeline: str, when: str) -> None:
        self._step = step
        self._point = f"{pipeline}:{step.name}:{when}"
        self._when = when
        self.name = step.name

    def take(self, ctx: Any) -> StepOutcome:
        if self._when == "before":
            _die(self._point)
        outcome = self._step.take(ctx)
        if self._when == "after":
            _die(self._point)
        return outcome

    def rollback(self, ctx: Any) -> None:
        if isinstance(self._step, Rollbackable):
            self._step.rollback(ctx)


def with_crash_points(
    pipeline: str, steps: Sequence[Step[Any]], environ: Mapping[str, str] = os.environ
) -> list[Step[Any]]:
    """``steps``, with the one named by ``GPU_HANDLER_CRASH_AT`` wrapped to crash there."""
    target = environ.get(CRASH_AT_ENV, "")
    name, _, rest = target.partition(":")
    step_name, _, when = rest.partition(":")
    if name != pipeline or when not in ("before", "after"):
        return list(steps)
    return [CrashPoint(s, pipeline=pipeline, when=when) if s.name == step_name else s for s in steps]
