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

The set follows the checkpoint as it is told it, and reads nothing itself: the checkpoint has one
reader, under the node lock. A Prepare tells it the checkpoint once the claim is recorded, before
any bind (so the enrichment never sees a card leave the NVIDIA driver unheld), and the driver
(:mod:`.driver`) tells it the checkpoint as each Prepare and Unprepare left it, at the end of the
call and still under the lock; start-up tells it after its reconciliation
(before the plugin serves: until then nothing is held), and the MPS watchdog at each periodic
read (another instance, in a rolling update, may have changed the checkpoint). A card released
stays *returning* until its PhysicalGPU no longer says ``VFIO`` — gpu-node-agent notices the
driver change on its next scan — so the gap between the rebind and that report does not withdraw
the offers either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pkg.gpuhandler.preparation.checkpoint import CheckpointData


class VfioHolds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._returning: set[str] = set()
        self._listeners: list[Callable[[CheckpointData], None]] = []

    def update(self, checkpoint: CheckpointData) -> None:
        """The checkpoint as just loaded or written: its VFIO cards are held, the others released.
        Then every listener is told the checkpoint (the publisher's devices in use)."""
        fresh = checkpoint.vfio_cards()
        with self._lock:
            self._returning |= self._held - fresh
            self._returning -= fresh
            self._held = fresh
            listeners = list(self._listeners)
        for listener in listeners:
            listener(checkpoint)

    def subscribe(self, listener: Callable[[CheckpointData], None]) -> None:
        """``listener`` hears every checkpoint this set is told, after the set: the one feed of
        the checkpoint as Prepare, Unprepare, start-up and the watchdog leave it."""
        with self._lock:
            self._listeners.append(listener)

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
