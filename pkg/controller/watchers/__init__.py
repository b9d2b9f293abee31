"""Reusable watchers: subscriptions of a controller to the kinds it depends on (spec §10.4, item 6)."""

from pkg.controller.watchers.object_ref_watcher import (
    ObjectRefWatcher,
    RequestEnqueuer,
    UpdateEventsFilter,
    Watcher,
)

__all__ = ["ObjectRefWatcher", "RequestEnqueuer", "UpdateEventsFilter", "Watcher"]
