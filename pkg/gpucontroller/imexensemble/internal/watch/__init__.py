"""What wakes a clique's ensemble (requests are named by the clique): the domains pinned to it, the
slices offering its channels, its own Pods and ConfigMap, and the operator configuration."""

from pkg.gpucontroller.imexensemble.internal.watch.daemon import ensemble_config_map_watch, ensemble_pod_watch
from pkg.gpucontroller.imexensemble.internal.watch.domain import domain_watch
from pkg.gpucontroller.imexensemble.internal.watch.operator_config import operator_config_watch
from pkg.gpucontroller.imexensemble.internal.watch.slice import slice_watch

__all__ = [
    "domain_watch",
    "ensemble_config_map_watch",
    "ensemble_pod_watch",
    "operator_config_watch",
    "slice_watch",
]
