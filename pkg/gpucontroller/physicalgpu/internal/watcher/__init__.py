"""Watches of the PhysicalGPU controller besides its own objects."""

from pkg.gpucontroller.physicalgpu.internal.watcher.node_watcher import node_watcher

__all__ = ["node_watcher"]
