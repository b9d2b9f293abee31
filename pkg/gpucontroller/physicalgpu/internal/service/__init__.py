"""I/O of the PhysicalGPU controller: the only place it talks to the API server."""

from pkg.gpucontroller.physicalgpu.internal.service.physicalgpu_service import PhysicalGPUService

__all__ = ["PhysicalGPUService"]
