"""The read-mostly snapshot a sync works on, the desired fields, and PhysicalGPU naming."""

from pkg.inventory.discovery import DiscoveredGPU
from pkg.nodeagent.internal.state.snapshot import Failure, StateFactory, SyncState

__all__ = ["DiscoveredGPU", "Failure", "StateFactory", "SyncState"]
