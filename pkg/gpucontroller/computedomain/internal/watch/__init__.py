"""What wakes a ComputeDomain: its own events, its claims, its template, its clique's IMEX
ensemble (Pods and ConfigMap), channel offers, and the operator configuration; one watch per file."""

from pkg.gpucontroller.computedomain.internal.watch.claim import claim_watch
from pkg.gpucontroller.computedomain.internal.watch.compute_domain import compute_domain_events
from pkg.gpucontroller.computedomain.internal.watch.daemon import daemon_config_map_watch, daemon_pod_watch
from pkg.gpucontroller.computedomain.internal.watch.operator_config import operator_config_watch
from pkg.gpucontroller.computedomain.internal.watch.slice import slice_watch
from pkg.gpucontroller.computedomain.internal.watch.template import template_watch

__all__ = [
    "claim_watch",
    "compute_domain_events",
    "daemon_config_map_watch",
    "daemon_pod_watch",
    "operator_config_watch",
    "slice_watch",
    "template_watch",
]
