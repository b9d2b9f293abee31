"""Metrics of NodePrepare/NodeUnprepare: why claims fail, how long each takes, MPS daemon restarts.

* ``gpu_dra_prepare_failures_total{reason,deviceType,vendor}``: claims whose preparation failed,
  by a CamelCase reason (``DoubleAllocation``, ``CardBusy``, ``PlacementUnavailable``,
  ``InvalidAllocation``, ``CheckpointUnreadable``, ``NodeLockTimeout``, …), the device type of
  the claim's first device (``unknown`` when the allocation could not be read) and the vendor;
* ``gpu_dra_prepare_seconds{operation,result}``: how long one claim's prepare or unprepare took,
  node lock included;
* ``gpu_dra_mps_daemon_restarts_total``: MPS control daemons that died while shares used their
  card and were started again (a card's address is in the log line).
"""

from __future__ import annotations

from pkg.domain.metrics import METRICS

prepare_failures = METRICS.counter(
    "dra_prepare_failures_total",
    "Claims whose NodePrepareResources failed, by reason, device type and vendor.",
    labelnames=["reason", "deviceType", "vendor"],
)
operation_seconds = METRICS.histogram(
    "dra_prepare_seconds",
    "Duration of one claim's prepare or unprepare on the node, node lock included.",
    labelnames=["operation", "result"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
mps_daemon_restarts = METRICS.counter(
    "dra_mps_daemon_restarts_total",
    "MPS control daemons started again after dying while shares used their card.",
)
startup_failures = METRICS.counter(
    "handler_startup_failures_total",
    "Start-up reconciliation steps that could not finish (retried later), by step.",
    labelnames=["step"],
)
