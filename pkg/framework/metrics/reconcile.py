"""Reconcile metrics, named and shaped like controller-runtime's, labelled by controller name.

* ``<ns>_reconcile_total{controller,result}``: passes by outcome: ``success`` (done, backoff
  forgotten), ``error`` (raised; retried with backoff unless terminal), ``requeue`` (asked for a
  backoff requeue) and ``requeue_after`` (asked for a pass after a fixed delay).
* ``<ns>_reconcile_errors_total{controller}``: passes that raised, terminal errors included.
* ``<ns>_reconcile_time_seconds{controller}``: duration of each pass, whatever its outcome.
* ``<ns>_reconcile_panics_total{controller}``: passes that raised an *unexpected* exception (a bug
  rather than an operational failure; see :mod:`pkg.framework.controller.controller`).
* ``<ns>_active_workers{controller}``: workers inside a reconcile right now.

The families come from the process's :class:`~pkg.framework.metrics.provider.MetricsProvider`
(``<ns>`` is its namespace; the project's is ``gpu``); :class:`ReconcileMetrics` binds one
controller's series and creates them at zero, so ``rate()`` and alerts see them before the first
failure.
"""

from __future__ import annotations

from enum import StrEnum

from pkg.framework.metrics.provider import MetricsProvider


class ReconcileResult(StrEnum):
    """Values of the ``result`` label of ``<ns>_reconcile_total``."""

    SUCCESS = "success"
    ERROR = "error"
    REQUEUE = "requeue"
    REQUEUE_AFTER = "requeue_after"


# controller-runtime's buckets: most passes take milliseconds, a slow API call takes seconds.
_TIME_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

_CONTROLLER = ("controller",)


class ReconcileMetrics:
    """The reconcile series of one controller."""

    def __init__(self, controller: str, *, provider: MetricsProvider) -> None:
        p = provider
        self._total = p.counter(
            "reconcile", "Reconciliations per controller and result.", labelnames=("controller", "result")
        )
        self._controller = controller
        self.errors = p.counter(
            "reconcile_errors", "Reconciliations per controller that raised an error.", labelnames=_CONTROLLER
        ).labels(controller=controller)
        self.time = p.histogram(
            "reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            labelnames=_CONTROLLER,
            buckets=_TIME_BUCKETS,
        ).labels(controller=controller)
        self.panics = p.counter(
            "reconcile_panics",
            "Reconciliations per controller that raised an unexpected exception.",
            labelnames=_CONTROLLER,
        ).labels(controller=controller)
        self.active_workers = p.gauge(
            "active_workers", "Workers of a controller currently inside a reconcile.", labelnames=_CONTROLLER
        ).labels(controller=controller)
        for result in ReconcileResult:
            self._total.labels(controller=controller, result=result.value)
        self.active_workers.set(0)

    def finished(self, result: ReconcileResult) -> None:
        """Counts one pass by its outcome (an error also counts in ``reconcile_errors``)."""
        self._total.labels(controller=self._controller, result=result.value).inc()
        if result is ReconcileResult.ERROR:
            self.errors.inc()


__all__ = ["ReconcileMetrics", "ReconcileResult"]
