"""A write barrier: wait until the informer cache has seen the agent's own writes.

Why: the agent decides from its caches, and a sync often follows right after another one (its own
label write wakes it, a burst of uevents outlasts the debounce). If the second sync read a cache
that has not yet received the first one's writes, it would create a card's object again
(AlreadyExists), or re-send a status the server already has. So every write tells the barrier the
resourceVersion it produced (or the uid it deleted), and the sync does not end until the informer
has delivered those events, which makes "the cache is at least as new as my last write" an
invariant between syncs. No resourceVersion is ever compared for order: the barrier waits for the
exact version it was told, as client-go's expectations do.

Bounded and forgiving: events seen before the write call returns are remembered (a short history),
and a wait that times out (a re-list skipped our version) only logs; the next sync works from
whatever the cache holds then.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

from pkg.framework.cache.listener import DeletedFinalStateUnknown

logger = logging.getLogger(__name__)

_HISTORY = 1024


class CacheBarrier:
    """An informer event handler that tracks versions the agent expects its cache to reach."""

    def __init__(self, *, name: str, history: int = _HISTORY) -> None:
        self.name = name
        self._history = history
        self._cond = threading.Condition()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()  # (name, rv) or ("uid", uid)
        self._pending: set[tuple[str, str]] = set()

    # -- informer side ---------------------------------------------------------------------------

    def on_add(self, obj: Any, *, is_in_initial_list: bool) -> None:
        self._saw((str(obj.metadata.name), str(obj.metadata.resource_version)))

    def on_update(self, old: Any, new: Any) -> None:
        self._saw((str(new.metadata.name), str(new.metadata.resource_version)))

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        self._saw(("uid", str(obj.metadata.uid)))

    # -- writer side -----------------------------------------------------------------------------

    def expect_version(self, name: str, resource_version: str | None) -> None:
        """The cache should reach ``resource_version`` of ``name`` (what a write returned)."""
        if resource_version:
            self._expect((name, resource_version))

    def expect_deleted(self, uid: str | None) -> None:
        if uid:
            self._expect(("uid", uid))

    def wait(self, timeout: float) -> bool:
        """Blocks until every expected event was seen; on timeout logs, forgets them, returns False."""
        with self._cond:
            if self._cond.wait_for(lambda: not self._pending, timeout):
                return True
            missing = sorted(self._pending)
            self._pending.clear()
        logger.warning(
            "cache did not catch up with our writes in time; the next sync may repeat work",
            extra={"barrier": self.name, "missing": missing[:10], "timeout_seconds": timeout},
        )
        return False

    # -- internals -------------------------------------------------------------------------------

    def _saw(self, key: tuple[str, str]) -> None:
        with self._cond:
            self._seen[key] = None
            while len(self._seen) > self._history:
                self._seen.popitem(last=False)
            if key in self._pending:
                self._pending.discard(key)
                self._cond.notify_all()

    def _expect(self, key: tuple[str, str]) -> None:
        with self._cond:
            if key not in self._seen:
                self._pending.add(key)
