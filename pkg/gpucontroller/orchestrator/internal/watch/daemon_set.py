"""Rendered DaemonSet events -> the one request of the configuration they were rendered from.

A DaemonSet appearing, disappearing, or changing its spec (generation), labels, owners or deletion
mark means someone edited or deleted what we render: the orchestrator puts it back. A DaemonSet's
status changes on every Pod event and is not watched.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1DaemonSet

from pkg.framework.controller.object_ref import ObjectRefWatch
from pkg.framework.reconcile import Request


def spec_or_ownership_changed(old: V1DaemonSet, new: V1DaemonSet) -> bool:
    def shape(ds: V1DaemonSet) -> tuple[Any, ...]:
        meta = ds.metadata
        if meta is None:
            return ()
        owners = [o.uid for o in meta.owner_references or []]
        return meta.generation, meta.labels, owners, meta.deletion_timestamp is not None

    return shape(old) != shape(new)


def daemon_set_watch(config: Request) -> ObjectRefWatch:
    """``config`` is the request of the configuration ConfigMap (the controller's only one)."""
    return ObjectRefWatch(update_filter=spec_or_ownership_changed, enqueuer=lambda _ds: [config])
