"""What wakes the orchestrator: its configuration ConfigMap and the DaemonSets rendered from it."""

from pkg.gpucontroller.orchestrator.internal.watch.config_map import config_map_events
from pkg.gpucontroller.orchestrator.internal.watch.daemon_set import daemon_set_watch

__all__ = ["config_map_events", "daemon_set_watch"]
