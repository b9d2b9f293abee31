"""Reconcile metrics, named and shaped like controller-runtime's, labelled by controller name.

* ``gpu_reconcile_total{controller,result}``: passes by outcome: ``success`` (done, backoff
  forgotten), ``error`` (raised; retried with backoff unless terminal), ``requeue`` (asked for a
  backoff requeue) and ``requeue_after`` (asked for a pass after a fixed delay).
* ``gpu_reconcile_errors_total{controller}``: passes that raised, terminal errors included.
* ``gpu_reconcile_time_seconds{controller}``: duration of each pass, whatever its outcome.
* ``gpu_reconcile_panics_total{controller}``: passes that raised an *unexpected* exception (a bug
  rather than an operational failure; see :mod:`pkg.controller.controller`).
* ``gpu_active_workers{controller}``: workers inside a reconcile right now.

Collectors are module-level and registered once, at import; :func:`init_controller` creates a
controller's series at zero, so ``rate()`` and alerts see them before the first failure.
"""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import Counter, Gauge, Histogram

from pkg.monitoring.metrics import NAMESPACE, registry


class ReconcileResult(StrEnum):
    """Values of the ``result`` label of ``gpu_reconcile_total``."""

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

reconcile_total = Counter(
    "reconcile",
    "Reconciliations per controller and result.",
    labelnames=["controller", "result"],
    namespace=NAMESPACE,
    registry=registry,
)
reconcile_errors = Counter(
    "reconcile_errors",
    "Reconciliations per controller that raised an error.",
    labelnames=["controller"],
    namespace=NAMESPACE,
    registry=registry,
)
reconcile_time = Histogram(
    "reconcile_time_seconds",
    "Length of time per reconciliation per controller.",
    labelnames=["controller"],
    namespace=NAMESPACE,
    registry=registry,
    buckets=_TIME_BUCKETS,
)
reconcile_panics = Counter(
    "reconcile_panics",
    "Reconciliations per controller that raised an unexpected exception.",
    labelnames=["controller"],
    namespace=NAMESPACE,
    registry=registry,
)
active_workers = Gauge(
    "active_workers",
    "Workers of a controller currently inside a reconcile.",
    labelnames=["controller"],
    namespace=NAMESPACE,
    registry=registry,
)


def init_controller(controller: str) -> None:
    """Creates every series of ``controller`` (counters at zero, no worker active)."""
    for result in ReconcileResult:
        reconcile_total.labels(controller=controller, result=result.value)
    reconcile_errors.labels(controller=controller)
    reconcile_panics.labels(controller=controller)
    reconcile_time.labels(controller=controller)
    active_workers.labels(controller=controller).set(0)


__all__ = [
    "ReconcileResult",
    "active_workers",
    "init_controller",
    "reconcile_errors",
    "reconcile_panics",
    "reconcile_time",
    "reconcile_total",
]
