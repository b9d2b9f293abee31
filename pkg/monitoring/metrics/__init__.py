"""The registry every collector of the project registers in.

One registry per process rather than prometheus_client's global default: tests build components
many times in one interpreter, and the manager exposes exactly what the project registered.
Metric names start with :data:`NAMESPACE` (``gpu_``), as spec §11.4 asks.
"""

from prometheus_client import CollectorRegistry

NAMESPACE = "gpu"

registry = CollectorRegistry(auto_describe=True)

__all__ = ["NAMESPACE", "registry"]
