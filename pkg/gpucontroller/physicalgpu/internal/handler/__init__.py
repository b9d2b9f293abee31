"""Handlers of the PhysicalGPU controller, in chain order."""

from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler

__all__ = ["DefaultConditionsHandler", "OrphanCleanupHandler"]
