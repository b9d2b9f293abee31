"""Metrics of gpu-node-agent: how long a sync takes, what it found, what failed, what it wrote.

* ``gpu_node_agent_sync_duration_seconds``: duration of each sync, whatever its outcome; its
  ``_count`` is the number of syncs, so ``rate()`` of it shows the wake-up rate (start, udev,
  deletes, SIGHUP, periodic resync).
* ``gpu_node_agent_devices{node}``: GPUs the last successful scan found on the node.
* ``gpu_node_agent_sync_errors_total{node,step}``: syncs in which a step (``discover``, ``apply``,
  ``cleanup``, ``node-labels``) failed; each failed sync is retried with backoff.
* ``gpu_node_agent_api_writes_total{node,kind,verb}``: write requests sent to the API server
  (``create``, ``patch``, ``apply``, ``delete``), counted when sent, whether or not they succeed.
  It stays flat while nothing changes on the node: the agent compares desired with cached state
  before writing, and a steady slope means it fights another writer.
"""

from __future__ import annotations

from pkg.domain.metrics import METRICS

# A sync reads a few dozen sysfs files and writes nothing in the steady state (milliseconds);
# writes to a slow API server take seconds.
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

sync_duration = METRICS.histogram(
    "node_agent_sync_duration_seconds",
    "Duration of node agent syncs (scan, compare, write).",
    buckets=_DURATION_BUCKETS,
)
devices = METRICS.gauge(
    "node_agent_devices",
    "GPUs found on the node by the last scan.",
    labelnames=["node"],
)
sync_errors = METRICS.counter(
    "node_agent_sync_errors",
    "Syncs in which a step failed, by step.",
    labelnames=["node", "step"],
)
api_writes = METRICS.counter(
    "node_agent_api_writes",
    "Write requests sent to the API server, by kind and verb.",
    labelnames=["node", "kind", "verb"],
)

STEPS = ("discover", "apply", "cleanup", "node-labels")


def init_node(node: str) -> None:
    """Creates the node's error series at zero, so alerts on ``rate()`` see them before a failure."""
    for step in STEPS:
        sync_errors.labels(node=node, step=step)


__all__ = ["STEPS", "api_writes", "devices", "init_node", "sync_duration", "sync_errors"]
