"""Handlers of the allocation controller, in chain order: eligibility, after-write, collision,
allocate."""

from pkg.dracontroller.internal.handler.after_write import AfterWriteHandler
from pkg.dracontroller.internal.handler.allocate import AllocateHandler
from pkg.dracontroller.internal.handler.collision import CollisionHandler
from pkg.dracontroller.internal.handler.eligibility import EligibilityHandler

__all__ = ["AfterWriteHandler", "AllocateHandler", "CollisionHandler", "EligibilityHandler"]
