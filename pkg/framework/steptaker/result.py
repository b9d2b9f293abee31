"""What one run (or one undo) of a pipeline did, step by step.

:meth:`~pkg.framework.steptaker.pipeline.Pipeline.run` returns a failure instead of raising it, as
:class:`~pkg.framework.reconcile.chain.HandlerChain` does: the caller decides what a failure means
(retry, report, record it in a status), and it needs more than the exception to decide: which steps
took effect, which were rolled back, and whether the rollback itself got stuck.

Two failures are kept apart on purpose. ``error`` is what made the run fail (a take, or a hook around
it, raised); ``undo_failure`` is an undo that raised while rolling back. The second never replaces
the first: the cause a user needs to see is why the operation failed, and the stuck undo is a leak
to report next to it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UndoFailure:
    """An undo that raised: the step whose ``undo`` it was, and what it raised. The runner stopped
    undoing there, so the effects of the steps before it stay in place."""

    step: str
    error: Exception


@dataclass(frozen=True)
class PipelineResult:
    """The steps of one run, by what became of them; every tuple is in the order things happened."""

    pipeline: str
    taken: tuple[str, ...]
    """Steps whose take returned DONE or STOP, in declared order (undone ones included)."""
    not_applicable: tuple[str, ...]
    """Steps whose take returned NOT_APPLICABLE."""
    stopped_at: str | None
    """The step whose take returned STOP, if one did."""
    failed_at: str | None
    """The step whose take (or hook) raised, if one did."""
    error: Exception | None
    """What it raised."""
    undone: tuple[str, ...]
    """Steps whose undo ran to the end, in the order they were undone (reverse declared order)."""
    undo_failure: UndoFailure | None
    """The undo that raised and stopped the rollback, if one did."""

    @property
    def ok(self) -> bool:
        """True when no take failed. It does not speak of undos: after
        :meth:`~pkg.framework.steptaker.pipeline.Pipeline.undo` (which takes nothing) it is always
        True, and the caller checks ``undo_failure``."""
        return self.error is None


__all__ = ["PipelineResult", "UndoFailure"]
