"""Watches of the allocation controller besides its own claims: which events wake which claims."""

from pkg.dracontroller.internal.watch.claim_watch import ClaimPeersWatch
from pkg.dracontroller.internal.watch.class_watch import class_watch
from pkg.dracontroller.internal.watch.namespace_watch import namespace_watch
from pkg.dracontroller.internal.watch.pod_watch import pod_watch
from pkg.dracontroller.internal.watch.slice_watch import slice_watch

__all__ = ["ClaimPeersWatch", "class_watch", "namespace_watch", "pod_watch", "slice_watch"]
