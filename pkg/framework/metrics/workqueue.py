"""Workqueue metrics, named and shaped like client-go's ``workqueue`` metrics, labelled by queue name.

The families are created through the process's
:class:`~pkg.framework.metrics.provider.MetricsProvider`, which memoises them; a queue binds the
children of its own ``name`` through :class:`QueueMetrics`. Building many queues (every unit test
does) therefore never registers anything twice, and two queues of the same name simply share their
series, as they would in client-go. ``<ns>`` is the provider's namespace (the project's is ``gpu``).

* ``<ns>_workqueue_depth``: items waiting in the queue (not those being processed).
* ``<ns>_workqueue_adds_total``: adds that were accepted (duplicates of a waiting item are not).
* ``<ns>_workqueue_queue_duration_seconds``: time from the first add to the ``get`` that took it.
* ``<ns>_workqueue_work_duration_seconds``: time from ``get`` to ``done``.
* ``<ns>_workqueue_retries_total``: delayed re-adds (``add_after``, hence every rate-limited retry).
* ``<ns>_workqueue_unfinished_work_seconds``: summed age of the items being processed now; growth
  without ``work_duration`` observations means stuck workers.
* ``<ns>_workqueue_longest_running_processor_seconds``: age of the oldest item being processed.

The last two are computed at scrape time from the queue itself (``Gauge.set_function``), instead of
by a ticker thread as in client-go: nothing runs when nobody is looking.
"""

from __future__ import annotations

from collections.abc import Callable

from pkg.framework.metrics.provider import MetricsProvider

# client-go's buckets: 10 ns to 10 s, one per decade; queue and work times span that range.
_DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(10))
_NAME = ("name",)


class QueueMetrics:
    """The series of one queue name; the queue calls these with its own lock held, so keep them cheap."""

    def __init__(self, name: str, *, provider: MetricsProvider) -> None:
        p = provider
        self._depth = p.gauge("workqueue_depth", "Current depth of the workqueue.", labelnames=_NAME).labels(
            name=name
        )
        self._adds = p.counter("workqueue_adds", "Adds handled by the workqueue.", labelnames=_NAME).labels(
            name=name
        )
        self._queue_duration = p.histogram(
            "workqueue_queue_duration_seconds",
            "How long an item stays in the workqueue before being requested.",
            labelnames=_NAME,
            buckets=_DURATION_BUCKETS,
        ).labels(name=name)
        self._work_duration = p.histogram(
            "workqueue_work_duration_seconds",
            "How long processing an item from the workqueue takes.",
            labelnames=_NAME,
            buckets=_DURATION_BUCKETS,
        ).labels(name=name)
        self._retries = p.counter(
            "workqueue_retries", "Retries (delayed re-adds) handled by the workqueue.", labelnames=_NAME
        ).labels(name=name)
        self._unfinished = p.gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress that has not been observed by work_duration; "
            "large values indicate stuck workers.",
            labelnames=_NAME,
        ).labels(name=name)
        self._longest = p.gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds the longest running processor of the workqueue has been running.",
            labelnames=_NAME,
        ).labels(name=name)
        self._depth.set(0)

    def added(self, *, queue_len: int) -> None:
        self._adds.inc()
        self._depth.set(queue_len)

    def taken(self, *, queue_len: int, waited: float) -> None:
        self._depth.set(queue_len)
        self._queue_duration.observe(waited)

    def requeued(self, *, queue_len: int) -> None:
        """An item re-added while it was processed went back into the queue at ``done``."""
        self._depth.set(queue_len)

    def finished(self, *, worked: float) -> None:
        self._work_duration.observe(worked)

    def retried(self) -> None:
        self._retries.inc()

    def observe_in_flight(self, *, unfinished: Callable[[], float], longest: Callable[[], float]) -> None:
        """Makes the two in-flight gauges read the queue at scrape time."""
        self._unfinished.set_function(unfinished)
        self._longest.set_function(longest)


__all__ = ["QueueMetrics"]
