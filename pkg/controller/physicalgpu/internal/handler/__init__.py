"""Handlers of the PhysicalGPU controller, in chain order."""

from pkg.controller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.controller.physicalgpu.internal.handler.orphan_cleanup import OrphanCleanupHandler

__all__ = ["DefaultConditionsHandler", "OrphanCleanupHandler"]
