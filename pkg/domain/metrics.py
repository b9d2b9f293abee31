"""The project's metrics provider: one registry per process, every name prefixed ``gpu_``.

One registry rather than prometheus_client's global default: tests build components many times in
one interpreter, and the manager exposes exactly what the project registered. ``pkg.app`` hands
this provider to the framework (manager, controllers, queues, leader election), and the components
create their own families from it, so every series of a process is served by one ``/metrics``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from pkg.framework.metrics import MetricsProvider

NAMESPACE = "gpu"

METRICS = MetricsProvider(registry=CollectorRegistry(auto_describe=True), namespace=NAMESPACE)
registry = METRICS.registry

__all__ = ["METRICS", "NAMESPACE", "registry"]
