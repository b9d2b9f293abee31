"""The cards of this node as the offer builder needs them: the enrichment's hook for the publisher.

The enrichment reads every card through the vendor backend anyway; it leaves the result here, one
:class:`~pkg.dra.model.card.Card` per PhysicalGPU, so the ResourceSlice publisher gets engine
counts and placements (which the PhysicalGPU schema does not carry) without a second NVML pass
and without knowing any vendor. The publisher depends on :class:`CardSpecProvider` only:

* :meth:`CardSpecProvider.snapshot` gives an immutable view, name → :class:`CardEntry`;
* :meth:`CardSpecProvider.subscribe` registers a callback run after every change (a card added,
  changed, removed, or its readiness flipped), typically "enqueue a publish".

``ready`` says whether the card may be offered now (DriverReady=True, bound to the vendor's
driver). A card whose driver went away keeps its last description with ``ready=False`` instead of
vanishing, because a card bound to ``vfio-pci`` for a VM is still allocated and the publisher must
decide what that means for its offers. An entry disappears only with its PhysicalGPU.

Thread-safe: the enrichment writes from its worker, the publisher reads from its own; callbacks run
outside the lock, in the writer's thread, so they must be quick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from pkg.dra.model.card import Card

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CardEntry:
    card: Card
    ready: bool


class CardSpecProvider(Protocol):
    def snapshot(self) -> Mapping[str, CardEntry]: ...

    def subscribe(self, listener: Callable[[], None]) -> None: ...


class CardSpecs:
    """The store behind :class:`CardSpecProvider`; the enrichment calls the mutators."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, CardEntry] = {}
        self._listeners: list[Callable[[], None]] = []

    def snapshot(self) -> Mapping[str, CardEntry]:
        with self._lock:
            return MappingProxyType(dict(self._entries))

    def subscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def put(self, name: str, card: Card) -> bool:
        """Records the ready card of PhysicalGPU ``name``; returns whether anything changed."""
        return self._set(name, CardEntry(card=card, ready=True))

    def mark_unready(self, name: str) -> bool:
        """Keeps the last description of ``name`` but says it may not be offered now."""
        with self._lock:
            entry = self._entries.get(name)
        return entry is not None and self._set(name, CardEntry(card=entry.card, ready=False))

    def remove(self, name: str) -> bool:
        with self._lock:
            removed = self._entries.pop(name, None) is not None
        if removed:
            self._notify()
        return removed

    def _set(self, name: str, entry: CardEntry) -> bool:
        with self._lock:
            if self._entries.get(name) == entry:
                return False
            self._entries[name] = entry
        self._notify()
        return True

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:  # one subscriber's bug must not stop the enrichment or the others
                logger.exception("card spec listener failed")
