"""The node agent's watches of its informers: which object events wake a sync."""

from pkg.nodeagent.internal.watch.events import gpu_events, node_events

__all__ = ["gpu_events", "node_events"]
