"""Cards bound to ``vfio-pci`` on purpose, for a claim: allocated, not broken (DESIGN §6).

While a card is passed through, NVML cannot see it and gpu-node-agent reports ``driverType:
VFIO``. Without this, the enrichment would call the card unreadable and the publisher would
withdraw its offers — and publish them again after the VM is gone: churn in every ResourceSlice
watcher, and the allocated device missing from the slice while its claim still holds it. So the
kubelet plugin keeps this set, and the readers treat a held card as allocated:

* the enrichment's readiness says ``HELD``: no health check (NVML losing the card is the
  passthrough, not a fault, so ``HardwareHealthy`` stays as it was), no reads; the live NVIDIA
  state is withdrawn as the CRD requires off the NVIDIA driver; the card's offer description stays;
* the publisher keeps offering the card as last described (its exclusive allocation already
  consumes every counter of the card, so nothing else can be allocated from it).

The set follows the checkpoint: every write of it (``record-started`` before the first bind,
``forget-claim`` after the last rebind, start-up reconciliation) replaces it. A card released
stays *returning* until its PhysicalGPU no longer says ``VFIO`` — gpu-node-agent notices the
driver change on its next scan — so the gap between the rebind and that report does not
withdraw the offers either. Before the first write of this process the set is read from the
checkpoint file once; an unreadable file holds nothing (and Prepare refuses to work anyway).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from pkg.gpuhandler.preparation.checkpoint import CheckpointData, CheckpointError

logger = logging.getLogger(__name__)


class VfioHolds:
    def __init__(self, load: Callable[[], CheckpointData] | None = None) -> None:
        self._lock = threading.Lock()
        self._load = load
        self._held: set[str] | None = None if load is not None else set()
        self._returning: set[str] = set()

    def update(self, checkpoint: CheckpointData) -> None:
        """The checkpoint as just written: its VFIO cards are held, the others released."""
        self._replace(checkpoint.vfio_cards())

    def held(self, card: str, *, reported_vfio: bool) -> bool:
        """Whether ``card`` is passed through for a claim (or just given back, while the
        PhysicalGPU still reports ``VFIO``: ``reported_vfio``)."""
        self._ensure_loaded()
        with self._lock:
            assert self._held is not None
            if card in self._held:
                return True
            if card in self._returning:
                if reported_vfio:
                    return True
                self._returning.discard(card)
            return False

    def cards(self) -> frozenset[str]:
        self._ensure_loaded()
        with self._lock:
            return frozenset(self._held or ())

    def _replace(self, cards: Iterable[str]) -> None:
        fresh = set(cards)
        with self._lock:
            before = self._held or set()
            self._returning |= before - fresh
            self._returning -= fresh
            self._held = fresh

    def _ensure_loaded(self) -> None:
        with self._lock:
            if self._held is not None or self._load is None:
                return
            load = self._load
        try:
            cards = load().vfio_cards()
        except CheckpointError as exc:
            logger.error("cannot read which cards are passed through: %s", exc)
            cards = set()
        with self._lock:
            if self._held is None:
                self._held = set(cards)
