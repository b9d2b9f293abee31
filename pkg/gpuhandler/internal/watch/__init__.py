"""Watch predicates of the enrichment."""

from pkg.gpuhandler.internal.watch.gpu_events import gpu_events

__all__ = ["gpu_events"]
