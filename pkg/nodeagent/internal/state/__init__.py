"""The scratch state a sync works on (its inputs, the cards found, what went wrong)."""

from pkg.inventory.discovery import DiscoveredGPU
from pkg.nodeagent.internal.state.sync_state import Failure, StateFactory, SyncState

__all__ = ["DiscoveredGPU", "Failure", "StateFactory", "SyncState"]
