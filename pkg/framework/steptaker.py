"""StepTaker: an ordered pipeline of steps with rollback, for Prepare/Unprepare on a node.

Preparing a device is several side effects in a row (create a MIG instance, bind VFIO, write a CDI
spec). If step three fails, steps one and two must be undone, or the node leaks half-prepared
devices that no later call knows about. The pipeline makes that ordering explicit and testable:

* Steps run in order and share one mutable context ``C``: data flows through the context, an
  outcome (:class:`Continue`, :class:`Stop`, :class:`Fail`) only carries control flow.
* :class:`Stop` is an early *success* (e.g. "already prepared"): later steps are skipped and
  nothing is rolled back.
* :class:`Fail`, or any ``Exception`` raised by ``take``, rolls back the steps that *completed*
  (returned :class:`Continue`) in reverse order, since later steps build on earlier ones. The
  failing step itself is not rolled back: only it knows how far it got, so it cleans up its own
  partial work before returning ``Fail`` or raising.
* Only steps that also implement :class:`Rollbackable` are rolled back; steps without side
  effects (validation, lookups) simply don't define ``rollback``.
* A rollback error is logged and collected, and the remaining rollbacks still run: one stuck
  cleanup must not leak the resources of every step before it.

Crash safety: the process can die between two steps, and then no rollback runs at all. The kubelet
retries Prepare/Unprepare, so every ``take`` and ``rollback`` must be idempotent (creating what
exists, or removing what is gone, is success); a re-run converges, and an "already done" check at
the front can :class:`Stop` it cheaply.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

logger = logging.getLogger(__name__)

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class Continue:
    """The step did its work; run the next one."""


@dataclass(frozen=True, slots=True)
class Stop:
    """End the pipeline early as a success; ``reason`` is logged and reported (e.g. "already prepared")."""

    reason: str


@dataclass(frozen=True, slots=True)
class Fail:
    """The step failed and has cleaned up after itself; roll back the completed steps."""

    error: Exception


StepOutcome = Continue | Stop | Fail


class Step(Protocol[C_contra]):
    """One deterministic, idempotent unit of work in a pipeline."""

    @property
    def name(self) -> str:
        """A name unique within the pipeline; it appears in logs and in :class:`PipelineResult`."""
        ...

    def take(self, ctx: C_contra) -> StepOutcome:
        """Do the work (or notice it is already done) and say how the pipeline goes on."""
        ...


@runtime_checkable
class Rollbackable(Protocol[C_contra]):
    """Implemented, next to :class:`Step`, by steps whose ``take`` has side effects to undo."""

    def rollback(self, ctx: C_contra) -> None:
        """Undo what ``take`` did; idempotent, since a retried pipeline may undo it again."""
        ...


@dataclass(frozen=True, slots=True)
class RollbackError:
    """A rollback that raised: the step and the error, so the leak can be found and fixed."""

    step: str
    error: Exception


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """What a run did. ``failed_step``/``error`` are set only on failure, ``stop_reason`` on Stop.

    ``completed`` lists steps whose ``take`` returned Continue or Stop, in order; ``rolled_back``
    lists steps whose rollback succeeded, in the order they were rolled back.
    """

    pipeline: str
    completed: tuple[str, ...] = ()
    stopped_by: str | None = None
    stop_reason: str | None = None
    failed_step: str | None = None
    error: Exception | None = None
    rolled_back: tuple[str, ...] = ()
    rollback_errors: tuple[RollbackError, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no step failed (the pipeline ran to the end or stopped early)."""
        return self.error is None

    def raise_for_error(self) -> None:
        """Raise :class:`PipelineError` (chained to the step's error) if a step failed."""
        if self.error is not None:
            raise PipelineError(self) from self.error


class PipelineError(Exception):
    """A pipeline failed; ``result`` holds the failing step, its error and the rollback report."""

    def __init__(self, result: PipelineResult) -> None:
        super().__init__(
            f"pipeline {result.pipeline!r}: step {result.failed_step!r} failed: {result.error}"
            f" (rollback errors: {len(result.rollback_errors)})"
        )
        self.result = result


class StepTaker(Generic[C]):
    """Runs steps in order over a shared context, rolling completed steps back on failure."""

    def __init__(self, *, name: str, steps: Sequence[Step[C]]) -> None:
        names = [step.name for step in steps]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:  # results and logs identify steps by name, so they must be unambiguous
            raise ValueError(f"pipeline {name!r}: duplicate step names {duplicates}")
        self._name = name
        self._steps = tuple(steps)

    @property
    def name(self) -> str:
        """The pipeline's name, as it appears in logs and results."""
        return self._name

    @property
    def steps(self) -> tuple[Step[C], ...]:
        """The steps in the order :meth:`run` takes them (fault-injection tests replay a prefix)."""
        return self._steps

    def run(self, ctx: C) -> PipelineResult:
        """Run the pipeline once over ``ctx``; never raises for a step's ``Exception``."""
        completed: list[Step[C]] = []
        for step in self._steps:
            extra = {"pipeline": self._name, "step": step.name}
            try:
                outcome = step.take(ctx)
            except Exception as exc:
                outcome = Fail(exc)
            if isinstance(outcome, Continue):
                logger.debug("step completed", extra=extra)
                completed.append(step)
            elif isinstance(outcome, Stop):
                logger.info("pipeline stopped early: %s", outcome.reason, extra=extra)
                return PipelineResult(
                    pipeline=self._name,
                    completed=(*(s.name for s in completed), step.name),
                    stopped_by=step.name,
                    stop_reason=outcome.reason,
                )
            else:
                # Anything but an outcome is a bug in the step; it still must not skip rollback.
                error = outcome.error if isinstance(outcome, Fail) else TypeError(f"bad outcome {outcome!r}")
                logger.error("step failed: %s", error, exc_info=error, extra=extra)
                rolled_back, rollback_errors = self._roll_back(ctx, completed)
                return PipelineResult(
                    pipeline=self._name,
                    completed=tuple(s.name for s in completed),
                    failed_step=step.name,
                    error=error,
                    rolled_back=rolled_back,
                    rollback_errors=rollback_errors,
                )
        return PipelineResult(pipeline=self._name, completed=tuple(s.name for s in completed))

    def _roll_back(
        self, ctx: C, completed: Sequence[Step[C]]
    ) -> tuple[tuple[str, ...], tuple[RollbackError, ...]]:
        # Reverse order: a later step may depend on an earlier one (a VFIO bind on the MIG
        # instance it binds), so it has to be undone while its foundation still exists.
        rolled_back: list[str] = []
        errors: list[RollbackError] = []
        for step in reversed(completed):
            if not isinstance(step, Rollbackable):
                continue
            extra = {"pipeline": self._name, "step": step.name}
            try:
                step.rollback(ctx)
            except Exception as exc:
                logger.error("rollback failed: %s", exc, exc_info=exc, extra=extra)
                errors.append(RollbackError(step=step.name, error=exc))
            else:
                logger.info("step rolled back", extra=extra)
                rolled_back.append(step.name)
        return tuple(rolled_back), tuple(errors)
