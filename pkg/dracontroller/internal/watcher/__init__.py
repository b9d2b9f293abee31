"""Watches of the allocation controller besides its own claims: which events wake which claims."""

from pkg.dracontroller.internal.watcher.claim_watcher import ClaimPeersWatcher
from pkg.dracontroller.internal.watcher.class_watcher import class_watcher
from pkg.dracontroller.internal.watcher.namespace_watcher import namespace_watcher
from pkg.dracontroller.internal.watcher.pod_watcher import pod_watcher
from pkg.dracontroller.internal.watcher.slice_watcher import slice_watcher

__all__ = ["ClaimPeersWatcher", "class_watcher", "namespace_watcher", "pod_watcher", "slice_watcher"]
