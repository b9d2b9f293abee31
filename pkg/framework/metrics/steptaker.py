"""Step-taker metrics: how long each step of a pipeline takes, and how it ends.

* ``<ns>_steptaker_step_duration_seconds{pipeline,step,outcome}``: one sample per step the runner
  reaches, ``outcome`` being ``done``, ``not-applicable``, ``stop`` or ``failed`` (its take, or a
  hook around it, raised). The count of the ``failed`` series is the failure rate of a step; the
  buckets show which step makes an operation slow.

The buckets span 1 ms (a write to a local file) to 60 s (a device reset, a driver call that waits
for the hardware); a step slower than a minute lands in ``+Inf``, which is itself worth an alert.
The family comes from the process's :class:`~pkg.framework.metrics.provider.MetricsProvider`
(``<ns>`` is its namespace); :class:`StepMetrics` binds one pipeline's series and creates them at
zero for every step and outcome, so ``rate()`` and alerts see a step before its first failure.
Undos are not timed: an undo that fails is logged at ERROR by the runner, with its fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pkg.framework.metrics.provider import MetricsProvider


class TakeOutcome(StrEnum):
    """Values of the ``outcome`` label: the three outcomes of a step that returned, and ``failed``."""

    DONE = "done"
    NOT_APPLICABLE = "not-applicable"
    STOP = "stop"
    FAILED = "failed"


STEP_DURATION = "steptaker_step_duration_seconds"

# 1 ms to 60 s, about three per decade.
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class StepMetrics:
    """The step-duration series of one pipeline."""

    def __init__(self, pipeline: str, *, steps: Iterable[str], provider: MetricsProvider) -> None:
        self._pipeline = pipeline
        self._duration = provider.histogram(
            STEP_DURATION,
            "Duration of each step taken by a step-taker pipeline, by pipeline, step and outcome.",
            labelnames=("pipeline", "step", "outcome"),
            buckets=_DURATION_BUCKETS,
        )
        # Every series made once, here: a step's sample is then one observe on its child.
        self.series: dict[tuple[str, TakeOutcome], Any] = {
            (step, outcome): self._duration.labels(pipeline=pipeline, step=step, outcome=outcome.value)
            for step in steps
            for outcome in TakeOutcome
        }


__all__ = ["STEP_DURATION", "StepMetrics", "TakeOutcome"]
