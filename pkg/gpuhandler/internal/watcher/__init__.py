"""Watch predicates of the enrichment."""

from pkg.gpuhandler.internal.watcher.gpu_events import gpu_events

__all__ = ["gpu_events"]
