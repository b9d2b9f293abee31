"""Handlers of the allocation controller, in chain order: eligibility, collision, allocate."""

from pkg.controller.resourceclaim.internal.handler.allocate import AllocateHandler
from pkg.controller.resourceclaim.internal.handler.collision import CollisionHandler
from pkg.controller.resourceclaim.internal.handler.eligibility import EligibilityHandler

__all__ = ["AllocateHandler", "CollisionHandler", "EligibilityHandler"]
