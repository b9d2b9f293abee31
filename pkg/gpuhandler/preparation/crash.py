"""Fault injection: die with SIGKILL at a named point of Prepare or Unprepare, to prove crash safety.

``GPU_HANDLER_CRASH_AT=<pipeline>:<point>:<before|after>`` (e.g. ``prepare:prepare-devices:after``)
makes the process kill itself there, as a node losing power or an OOM kill would: no ``finally``,
no rollback, no flush. Tests set it for one run of the gpu-handler, let the kubelet call, restart
the handler without it, and check that the retry converges (one MIG device per claim, no stray
CDI file, a consistent checkpoint).

The points are the phases of the straight Prepare (:mod:`.prepare`) and Unprepare
(:mod:`.unprepare`), in the order they run: :data:`PREPARE_POINTS` and :data:`UNPREPARE_POINTS`.
Each phase is a ``with`` block of its own; :func:`crash_at` reads the variable once, when the
preparer is built, and the phase compares its name with what it read (nothing when unset).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping
from typing import Final, Literal

logger = logging.getLogger(__name__)

CRASH_AT_ENV: Final = "GPU_HANDLER_CRASH_AT"

PREPARE_POINTS: Final = (
    "load-checkpoint",
    "recorded-answer",
    "plan",
    "refuse-double-allocation",
    "driver-files",
    "record-started",
    "prepare-devices",
    "write-cdi-spec",
    "record-completed",
)
UNPREPARE_POINTS: Final = ("load-checkpoint", "nothing-to-unprepare", "release-claim", "forget-claim")

When = Literal["before", "after"]


def crash_at(
    pipeline: str, points: tuple[str, ...], environ: Mapping[str, str] = os.environ
) -> tuple[str, When] | None:
    """The point of ``pipeline`` and the side of it that ``GPU_HANDLER_CRASH_AT`` names, if any."""
    target = environ.get(CRASH_AT_ENV, "")
    name, _, rest = target.partition(":")
    point, _, when = rest.partition(":")
    if name != pipeline:
        return None
    if point not in points or when not in ("before", "after"):
        logger.warning("%s=%s names no crash point of %s %s", CRASH_AT_ENV, target, pipeline, points)
        return None
    return point, "before" if when == "before" else "after"


def die(where: str) -> None:
    """Kills this process at once (SIGKILL), as a power loss would."""
    logger.warning("crashing on purpose at %s (%s)", where, CRASH_AT_ENV)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)
