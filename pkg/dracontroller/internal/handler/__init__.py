"""Handlers of the allocation controller, in chain order: eligibility, collision, allocate."""

from pkg.dracontroller.internal.handler.allocate import AllocateHandler
from pkg.dracontroller.internal.handler.collision import CollisionHandler
from pkg.dracontroller.internal.handler.eligibility import EligibilityHandler

__all__ = ["AllocateHandler", "CollisionHandler", "EligibilityHandler"]
