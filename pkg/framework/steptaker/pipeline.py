"""The runner: take the steps in order; on a failure, undo what took effect, newest first.

This is a saga in miniature. An operation made of several effects that cannot share one
transaction (a record on disk, a device, a grant to a container) is written as a list of
:class:`~pkg.framework.steptaker.step.Step`, each paired with its undo, and the runner keeps the
all-or-nothing promise by compensation:

* :meth:`Pipeline.run` takes the steps in declared order. A take that returns
  :attr:`~pkg.framework.steptaker.step.StepOutcome.DONE` or ``NOT_APPLICABLE`` lets the next one run;
  ``STOP`` ends the run successfully, and the later steps neither take nor undo.
* A take that raises an :class:`Exception` fails the run. The runner then undoes, in reverse order,
  the failed step itself (it may have done part of its work) and every step before it that returned
  ``DONE`` or ``STOP``; ``NOT_APPLICABLE`` steps did nothing and are not undone. The first undo that
  raises stops the rollback (see :mod:`~pkg.framework.steptaker.rollback` for why the earlier effects
  must then stay). ``run`` returns all of it in a
  :class:`~pkg.framework.steptaker.result.PipelineResult` and never raises for a step's
  :class:`Exception`: ``error`` is the take's exception (with a note naming the step), never the
  undo's.
* A :class:`BaseException` that is not an :class:`Exception` (``KeyboardInterrupt``, ``SystemExit``)
  propagates untouched, with nothing undone: the process is going away, and a process that dies
  mid-run is the same case as one killed, which recovery handles.
* :meth:`Pipeline.undo` runs every step's undo in reverse declared order, with the same
  stop-at-the-first-failure rule. It is for a caller that finds what a crashed run left behind and
  must release it through the same code as a failed run does; it is why every undo must be
  idempotent and cope with a take that never ran.

The hook (:data:`~pkg.framework.steptaker.step.StepHook`) is called before each take and after each
take that returned. A hook that raises fails the step as its take would: that step is undone too (for
a "before" hook, its take never ran, which its undo copes with). Undos are not hooked.

Every step the runner reaches is timed with ``clock`` (hooks included; in production there are
none) into ``steptaker_step_duration_seconds{pipeline,step,outcome}``
(:mod:`pkg.framework.metrics.steptaker`), ``outcome`` being the step's outcome or ``failed``, and
logged at DEBUG with the caller's ``log_fields`` as ``extra`` plus ``pipeline``, ``step``,
``outcome`` and ``seconds`` (and ``error`` for a failed one). Bad ``log_fields`` are refused with
:class:`ValueError` before the first take (:func:`checked_fields`).

Nothing about the GPU, or any resource, is known here: the steps and the context are the caller's.
A pipeline holds no per-run state, so one instance serves concurrent runs (as
:class:`~pkg.framework.reconcile.chain.HandlerChain` does), as far as its steps allow it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Generic

from pkg.framework.metrics.provider import MetricsProvider
from pkg.framework.metrics.steptaker import StepMetrics, TakeOutcome
from pkg.framework.steptaker.result import PipelineResult, UndoFailure
from pkg.framework.steptaker.rollback import roll_back
from pkg.framework.steptaker.step import C_contra, Step, StepHook, StepOutcome

logger = logging.getLogger(__name__)

# Attributes every LogRecord has; an ``extra`` key among them makes ``logging`` raise.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def checked_fields(log_fields: Mapping[str, object] | None) -> dict[str, object]:
    """A copy of ``log_fields`` (empty for None); ValueError if a key would clash with ``logging``.

    The runner logs every step with the caller's fields as ``extra``, and ``logging`` raises
    ``KeyError`` for a key that names an attribute every ``LogRecord`` has (``name``, ``msg``...)
    from inside the run, after some steps took effect and before the runner could undo them: so the
    fields are checked before the first step, a caller's mistake found by its first test. The
    runner's own fields are written after the caller's, so they win over one of the same name."""
    fields = dict(log_fields or {})
    clashes = sorted(set(fields) & _RECORD_ATTRIBUTES)
    if clashes:
        raise ValueError(f"log fields {clashes} are LogRecord attributes; rename them")
    return fields


class Pipeline(Generic[C_contra]):
    """Named, ordered steps over one context: :meth:`run` takes them, :meth:`undo` releases them."""

    def __init__(
        self,
        name: str,
        steps: Sequence[Step[C_contra]],
        *,
        hook: StepHook | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: MetricsProvider | None = None,
    ) -> None:
        """Refuses (ValueError) an empty pipeline name, an empty step name and two steps of one name:
        the names are log fields, metric labels and crash points, so each must point at one step."""
        if not name:
            raise ValueError("a pipeline needs a name")
        self._steps = tuple(steps)
        names = [step.name for step in self._steps]
        if not all(names):
            raise ValueError(f"pipeline {name!r}: every step needs a name")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"pipeline {name!r}: step names {duplicates} are not unique")
        self._name = name
        self._hook = hook
        self._clock = clock
        self._metrics = StepMetrics(name, steps=names, provider=metrics or MetricsProvider())

    @property
    def name(self) -> str:
        return self._name

    @property
    def step_names(self) -> tuple[str, ...]:
        """The steps' names, in declared (taking) order."""
        return tuple(step.name for step in self._steps)

    def run(self, context: C_contra, *, log_fields: Mapping[str, object] | None = None) -> PipelineResult:
        """Takes the steps in order; on a failure undoes the failed step and those that took effect.
        Never raises for a step's :class:`Exception` (see the module docs); ValueError for bad fields."""
        fields = checked_fields(log_fields)
        taken: list[Step[C_contra]] = []
        not_applicable: list[str] = []
        for step in self._steps:
            try:
                outcome = self._take(step, context, fields=fields)
            except Exception as exc:
                exc.add_note(f"raised by step {step.name!r} of pipeline {self._name!r}")
                undone, undo_failure = roll_back(
                    (step, *reversed(taken)),
                    context,
                    pipeline=self._name,
                    fields=fields,
                    failed_at=step.name,
                    clock=self._clock,
                )
                return self._result(
                    taken=taken,
                    not_applicable=not_applicable,
                    failed_at=step.name,
                    error=exc,
                    undone=undone,
                    undo_failure=undo_failure,
                )
            if outcome is StepOutcome.NOT_APPLICABLE:
                not_applicable.append(step.name)
                continue
            taken.append(step)
            if outcome is StepOutcome.STOP:
                return self._result(taken=taken, not_applicable=not_applicable, stopped_at=step.name)
        return self._result(taken=taken, not_applicable=not_applicable)

    def undo(self, context: C_contra, *, log_fields: Mapping[str, object] | None = None) -> PipelineResult:
        """Undoes every step in reverse declared order, stopping at the first undo that raises; fills
        ``undone`` and ``undo_failure`` only. Never raises for a step's :class:`Exception`."""
        fields = checked_fields(log_fields)
        undone, undo_failure = roll_back(
            tuple(reversed(self._steps)),
            context,
            pipeline=self._name,
            fields=fields,
            failed_at=None,
            clock=self._clock,
        )
        return self._result(taken=(), not_applicable=(), undone=undone, undo_failure=undo_failure)

    def _take(self, step: Step[C_contra], context: C_contra, *, fields: Mapping[str, object]) -> StepOutcome:
        """One step with its hooks, timed and logged; re-raises what the take or a hook raised."""
        started = self._clock()
        try:
            if self._hook is not None:
                self._hook(self._name, step.name, "before")
            outcome = step.take(context)
            if not isinstance(outcome, StepOutcome):
                raise TypeError(f"step {step.name!r} returned {outcome!r}, not a StepOutcome")
            if self._hook is not None:
                self._hook(self._name, step.name, "after")
        except Exception as exc:
            self._record(
                step.name, outcome=TakeOutcome.FAILED, started=started, fields={**fields, "error": repr(exc)}
            )
            raise
        self._record(step.name, outcome=TakeOutcome(outcome.value), started=started, fields=fields)
        return outcome

    def _record(
        self, step: str, *, outcome: TakeOutcome, started: float, fields: Mapping[str, object]
    ) -> None:
        seconds = self._clock() - started
        self._metrics.series[(step, outcome)].observe(seconds)
        logger.debug(
            "step %s of pipeline %s: %s",
            step,
            self._name,
            outcome.value,
            extra={
                **fields,
                "pipeline": self._name,
                "step": step,
                "outcome": outcome.value,
                "seconds": seconds,
            },
        )

    def _result(
        self,
        *,
        taken: Sequence[Step[C_contra]],
        not_applicable: Sequence[str],
        stopped_at: str | None = None,
        failed_at: str | None = None,
        error: Exception | None = None,
        undone: tuple[str, ...] = (),
        undo_failure: UndoFailure | None = None,
    ) -> PipelineResult:
        return PipelineResult(
            pipeline=self._name,
            taken=tuple(step.name for step in taken),
            not_applicable=tuple(not_applicable),
            stopped_at=stopped_at,
            failed_at=failed_at,
            error=error,
            undone=undone,
            undo_failure=undo_failure,
        )


__all__ = ["Pipeline"]
