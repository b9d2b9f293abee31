"""What wakes a GPUClass: its own events, its DeviceClass, the cards it names; one watch per file."""

from pkg.gpucontroller.gpuclass.internal.watch.device_class import device_class_watch
from pkg.gpucontroller.gpuclass.internal.watch.gpu_class import gpu_class_events
from pkg.gpucontroller.gpuclass.internal.watch.named_gpu import named_gpu_watch

__all__ = ["device_class_watch", "gpu_class_events", "named_gpu_watch"]
