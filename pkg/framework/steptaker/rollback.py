"""Rolling back: undo steps in the given order, and stop at the first undo that raises.

Why stop instead of trying the rest: the steps were taken in order because each relies on the ones
before it, and so does what each leaves behind. If the undo of a device fails, the record that says
the device is held must stay, or nothing will ever know to release it; undoing the steps before a
stuck one would destroy exactly what recovery needs. The runner therefore leaves the failed undo's
step and every step before it in effect, logs that at ERROR with the caller's fields (which steps
stay in effect, which take failed), and reports it as an
:class:`~pkg.framework.steptaker.result.UndoFailure`; the caller retries through the same path
(:meth:`~pkg.framework.steptaker.pipeline.Pipeline.undo`), since every ``undo`` is idempotent.

An undo that raises a :class:`BaseException` that is not an :class:`Exception` (``KeyboardInterrupt``,
``SystemExit``) is not caught: the process is going away, and recovery is the next start's job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from pkg.framework.steptaker.result import UndoFailure
from pkg.framework.steptaker.step import Step

logger = logging.getLogger(__name__)

C = TypeVar("C")


def roll_back(
    steps: Sequence[Step[C]],
    context: C,
    *,
    pipeline: str,
    fields: Mapping[str, object],
    failed_at: str | None,
    clock: Callable[[], float],
) -> tuple[tuple[str, ...], UndoFailure | None]:
    """Undoes ``steps`` in the order given (the caller reverses them); returns the names whose undo
    ran to the end, and the undo that raised, if one did. Never raises for an :class:`Exception`."""
    undone: list[str] = []
    for position, step in enumerate(steps):
        started = clock()
        try:
            step.undo(context)
        except Exception as exc:
            exc.add_note(f"raised by the undo of step {step.name!r} of pipeline {pipeline!r}")
            left = [step.name, *(s.name for s in steps[position + 1 :])]
            logger.error(
                "undo of step %s of pipeline %s failed; stopped undoing, steps %s stay in effect",
                step.name,
                pipeline,
                left,
                extra={
                    **fields,
                    "pipeline": pipeline,
                    "step": step.name,
                    "failed_at": failed_at,
                    "left": left,
                },
                exc_info=exc,
            )
            return tuple(undone), UndoFailure(step=step.name, error=exc)
        logger.debug(
            "undid step %s of pipeline %s",
            step.name,
            pipeline,
            extra={**fields, "pipeline": pipeline, "step": step.name, "seconds": clock() - started},
        )
        undone.append(step.name)
    return tuple(undone), None


__all__ = ["roll_back"]
