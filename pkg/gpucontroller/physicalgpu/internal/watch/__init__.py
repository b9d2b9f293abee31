"""What wakes a PhysicalGPU besides its own events: one watch per file."""

from pkg.gpucontroller.physicalgpu.internal.watch.node import node_watch
from pkg.gpucontroller.physicalgpu.internal.watch.validator_pod import validator_pod_watch

__all__ = ["node_watch", "validator_pod_watch"]
