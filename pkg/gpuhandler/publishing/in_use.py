"""Which of this node's devices are in use: what the fill-following order is ranked by.

The source is the preparation checkpoint: the kubelet calls NodePrepareResources right after a
Pod with a claim is bound to the node, and the plugin records every prepared device there (and
removes it at NodeUnprepareResources). That is the cheapest truthful source a node has — no
watch of the cluster's ResourceClaims (on 1,000 nodes, every node would receive every claim) —
and it is exact for what matters: a device is in use from its Prepare to its Unprepare.

The set is told, never read: the composition root connects the plugin's checkpoint feed (every
checkpoint a Prepare, an Unprepare, the start-up reconciliation or the watchdog left) to
:meth:`DevicesInUse.update`, and the publisher wakes on a change (:meth:`subscribe`). Until the
first update (no kubelet plugin on this node, or it has not started yet) :meth:`names` is None
and the publisher keeps the static order.

Only a node that follows the fill wakes the publisher (:func:`wake_if_fill_followed`): on a node
of one MIG model the order is the static one whatever is in use, and a publish there would list
the node's slices to write nothing. A node whose cards change is republished for that reason.

Bursts: a change only adds the publisher's single request, which the work queue holds once; a
burst of Prepares while a publish runs costs one more publish, and a publish writes only when the
order changed (:mod:`pkg.dra.publisher`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable

from pkg.dra.model.card import Card
from pkg.dra.model.fill_order import follows_fill

logger = logging.getLogger(__name__)


class DevicesInUse:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: frozenset[str] | None = None
        self._listeners: list[Callable[[], None]] = []

    def update(self, names: Collection[str]) -> None:
        """The device names prepared on this node now (of our pool); listeners hear a change."""
        fresh = frozenset(names)
        with self._lock:
            if fresh == self._names:
                return
            self._names = fresh
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:  # one listener's bug must not fail a Prepare
                logger.exception("a devices-in-use listener failed")

    def names(self) -> frozenset[str] | None:
        """The devices in use, or None while nothing has told the set (keep the static order)."""
        with self._lock:
            return self._names

    def subscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)


def wake_if_fill_followed(
    cards: Callable[[], Iterable[Card]], wake: Callable[[], None]
) -> Callable[[], None]:
    """A :class:`DevicesInUse` listener that calls ``wake`` only while the node's ``cards`` follow
    the fill (:func:`~pkg.dra.model.fill_order.follows_fill`)."""

    def changed() -> None:
        if follows_fill(cards()):
            wake()

    return changed
