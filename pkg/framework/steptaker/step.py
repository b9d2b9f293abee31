"""A step of a pipeline: something that can be done, and undone.

A :class:`Step` is one effect of a multi-step operation (write a record, create a device, grant an
access), paired with the action that reverses it. The runner
(:class:`~pkg.framework.steptaker.pipeline.Pipeline`) takes the steps in order and, when one fails,
undoes the ones that took effect; a step therefore never cleans up after itself on failure, it only
promises that its ``undo`` can.

The contract a step keeps:

* ``name`` is stable and unique within its pipeline: it names the step in logs, in the
  ``step`` label of the duration histogram, and as a crash point for fault injection (see
  :data:`StepHook`), so renaming one is a visible change.
* ``take(context)`` does the work and says how it went with a :class:`StepOutcome`. Deciding that a
  step does not apply (:attr:`StepOutcome.NOT_APPLICABLE`) is the step's own call, made from the
  context: the runner never skips a step on its own. Raising any :class:`Exception` is a failure.
* ``undo(context)`` reverses what ``take`` did. It is **idempotent** and must cope with a ``take``
  that did only part of its work, or none of it: the runner undoes the failed step itself (it may
  have done half its work before raising), a crashed process may have died anywhere inside a take,
  and :meth:`~pkg.framework.steptaker.pipeline.Pipeline.undo` calls every step's ``undo`` whether or
  not its take ever ran. An ``undo`` that finds nothing to reverse simply returns.

Steps share one context object (``C_contra``): the caller's blackboard, which the steps read and
fill in order, as the handlers of a :class:`~pkg.framework.reconcile.handler.Scratch` state do.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Literal, Protocol, TypeVar

C_contra = TypeVar("C_contra", contravariant=True)


class StepOutcome(enum.Enum):
    """What a ``take`` that returned did; a ``take`` that raised failed instead."""

    DONE = "done"
    """The step did its work; the next one runs. Undone if a later step fails."""

    NOT_APPLICABLE = "not-applicable"
    """The step does not apply to this context (the step says so itself, the runner never decides
    it). Nothing to undo: a later failure does not call its ``undo``. The next one runs."""

    STOP = "stop"
    """The pipeline ends here, successfully, as ``StopHandlerChain`` ends a handler chain: later
    steps do not run. The step counts as taken (its own work, if any, is undone on a failure)."""


class Step(Protocol[C_contra]):
    """One reversible effect of a pipeline (see the module docs for the contract)."""

    @property
    def name(self) -> str:
        """Stable, unique in its pipeline: the log field, the metric label, the crash point."""
        ...

    def take(self, context: C_contra) -> StepOutcome:
        """Does the work; raises an :class:`Exception` to fail the step."""
        ...

    def undo(self, context: C_contra) -> None:
        """Reverses ``take``: idempotent, and copes with a ``take`` that did part of its work or none."""
        ...


When = Literal["before", "after"]

StepHook = Callable[[str, str, When], None]
"""``hook(pipeline, step, when)``: called with ``"before"`` before each take and with ``"after"``
after each take that returned (whatever its outcome; not after one that raised). The application
uses it for fault injection: kill the process at a named point and check what recovery does. A hook
that raises fails the step exactly as if its take had raised (so the step is undone with the
others); undos are not hooked."""


__all__ = ["C_contra", "Step", "StepHook", "StepOutcome", "When"]
