"""The step taker: a saga-style pipeline of reversible steps, for operations that must be all or
nothing but span effects no single transaction covers.

* :mod:`.step`: a :class:`Step` (``name``, ``take``, ``undo``), the :class:`StepOutcome` of a take
  (``DONE``, ``NOT_APPLICABLE``, ``STOP``) and the :data:`StepHook` for fault injection;
* :mod:`.pipeline`: the runner, :class:`Pipeline` (``run`` takes the steps in order and compensates
  a failure by undoing, newest first, what took effect; ``undo`` releases everything, for recovery);
* :mod:`.rollback`: the undo loop and why it stops at the first undo that fails;
* :mod:`.result`: :class:`PipelineResult` and :class:`UndoFailure`, what a run did;

Nothing in controller-runtime or client-go matches it exactly: it is to a one-shot operation (a
kubelet plugin's prepare and unprepare) what the handler chain (:mod:`pkg.framework.reconcile.chain`)
is to a reconcile, with compensation instead of retries. Durations go to
``steptaker_step_duration_seconds`` (:mod:`pkg.framework.metrics.steptaker`).
"""

from pkg.framework.steptaker.pipeline import Pipeline
from pkg.framework.steptaker.result import PipelineResult, UndoFailure
from pkg.framework.steptaker.step import Step, StepHook, StepOutcome, When

__all__ = ["Pipeline", "PipelineResult", "Step", "StepHook", "StepOutcome", "UndoFailure", "When"]
