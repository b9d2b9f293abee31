"""Cards bound to ``vfio-pci`` on purpose, for a claim: allocated, not broken.

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

The passed-through kind tells the set a card before it binds the card to ``vfio-pci``
(:meth:`VfioHolds.hold`: the enrichment never sees a card leave the NVIDIA driver unheld) and
after it gave the card's functions back (:meth:`VfioHolds.returned`); start-up and the MPS
watchdog's periodic read set it from the checkpoint whole (:meth:`VfioHolds.update`: another
instance, in a rolling update, may have changed it). Until start-up nothing is held. A card
released stays *returning* until its PhysicalGPU no longer says ``VFIO`` — gpu-node-agent notices
the driver change on its next scan — so the gap between the rebind and that report does not
withdraw the offers either.
"""

from __future__ import annotations

import threading

from pkg.gpuhandler.preparation.checkpoint import CheckpointData
from pkg.gpuhandler.preparation.kinds.vm.records import vfio_of


class VfioHolds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._returning: set[str] = set()

    def update(self, checkpoint: CheckpointData) -> None:
        """The checkpoint as just loaded: its passed-through cards are held, the others released."""
        fresh = {d.card for c in checkpoint.claims.values() for d in c.devices if vfio_of(d) is not None}
        with self._lock:
            self._returning |= self._held - fresh
            self._returning -= fresh
            self._held = fresh

    def hold(self, card: str) -> None:
        """``card`` is about to leave the vendor's driver for a claim."""
        with self._lock:
            self._held.add(card)
            self._returning.discard(card)

    def returned(self, card: str) -> None:
        """``card``'s functions went back to their drivers; it stays returning until reported so."""
        with self._lock:
            if card in self._held:
                self._held.discard(card)
                self._returning.add(card)

    def held(self, card: str, *, reported_vfio: bool) -> bool:
        """Whether ``card`` is passed through for a claim (or just given back, while the
        PhysicalGPU still reports ``VFIO``: ``reported_vfio``)."""
        with self._lock:
            if card in self._held:
                return True
            if card in self._returning:
                if reported_vfio:
                    return True
                self._returning.discard(card)
            return False

    def cards(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)
