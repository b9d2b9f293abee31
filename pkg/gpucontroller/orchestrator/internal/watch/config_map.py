"""The configuration ConfigMap's own events: creates and deletes, and an update only when its data
changed or it was replaced by a new object (a new uid); its other metadata churn says nothing new
about what to render."""

from __future__ import annotations

from kubernetes.client import V1ConfigMap

from pkg.framework.controller.predicate import Funcs, Predicate


def config_changed(old: V1ConfigMap, new: V1ConfigMap) -> bool:
    return old.data != new.data or (old.metadata.uid if old.metadata else None) != (
        new.metadata.uid if new.metadata else None
    )


def config_map_events() -> Predicate:
    return Funcs(update=config_changed)
