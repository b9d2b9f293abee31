"""Watches of the PhysicalGPU controller besides its own objects."""

from pkg.gpucontroller.physicalgpu.internal.watch.node_watch import node_watch

__all__ = ["node_watch"]
