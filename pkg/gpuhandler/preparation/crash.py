"""Fault injection: die with SIGKILL at a named point of Prepare or Unprepare, to prove crash safety.

``GPU_HANDLER_CRASH_AT=<pipeline>:<step>:<before|after>`` (e.g. ``prepare:prepare-devices:after``)
makes the process kill itself there, as a node losing power or an OOM kill would: no ``finally``,
no rollback, no flush. Tests set it for one run of the gpu-handler, let the kubelet call, restart
the handler without it, and check that the retry converges (one MIG device per claim, no stray
CDI file, a consistent checkpoint).

The points are the steps of the two pipelines, by name, in the order the composition root
declares them (:data:`~.setup.PREPARE_POINTS`, :data:`~.setup.UNPREPARE_POINTS`): the hook
(:func:`crash_hook`) is the pipeline's StepHook, built once from the variable, and is no hook at
all when the variable names no point of that pipeline.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Final

from pkg.framework.steptaker import StepHook, When

logger = logging.getLogger(__name__)

CRASH_AT_ENV: Final = "GPU_HANDLER_CRASH_AT"


def crash_at(
    pipeline: str, points: Sequence[str], environ: Mapping[str, str] = os.environ
) -> tuple[str, When] | None:
    """The point of ``pipeline`` and the side of it that ``GPU_HANDLER_CRASH_AT`` names, if any."""
    target = environ.get(CRASH_AT_ENV, "")
    name, _, rest = target.partition(":")
    point, _, when = rest.partition(":")
    if name != pipeline:
        return None
    if point not in points or when not in ("before", "after"):
        logger.warning("%s=%s names no crash point of %s %s", CRASH_AT_ENV, target, pipeline, tuple(points))
        return None
    return point, "before" if when == "before" else "after"


def crash_hook(
    pipeline: str, points: Sequence[str], environ: Mapping[str, str] = os.environ
) -> StepHook | None:
    """The hook that kills the process at the point the variable names, or None (no hook)."""
    target = crash_at(pipeline, points, environ)
    if target is None:
        return None

    def hook(name: str, step: str, when: When) -> None:
        if (step, when) == target:
            die(f"{name}:{step}:{when}")

    return hook


def die(where: str) -> None:
    """Kills this process at once (SIGKILL), as a power loss would."""
    logger.warning("crashing on purpose at %s (%s)", where, CRASH_AT_ENV)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)
