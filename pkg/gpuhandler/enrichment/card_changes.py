"""How the kubelet plugin asks the enrichment to read a card again.

A Prepare or Unprepare that changes a card's mode (MIG, a share, a passthrough) changes what the
enrichment would read, but nothing in the API says so at once. The plugin calls
:meth:`EnrichmentCardChanges.changed` with the card's PCI address (the plugin's
:class:`~pkg.gpuhandler.preparation.services.CardChanges`); the card's PhysicalGPU name goes into a
channel source that the enrichment controller watches, so the card gets a pass of its own. The
gpu-handler's health wiring uses it too: a changed health verdict reads the card again, so
``HardwareHealthy`` follows the verdict at once.
"""

from __future__ import annotations

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.controller.source import ChannelSource


class EnrichmentCardChanges:
    """CardChanges for the enrichment: the card at a PCI address is read again by its controller."""

    def __init__(self, *, gpus: SharedInformer[PhysicalGPU], channel: ChannelSource) -> None:
        self._gpus = gpus
        self.channel = channel

    def changed(self, card: str) -> None:
        for gpu in self._gpus.store.list():
            if (
                gpu.status is not None
                and gpu.status.pci_info is not None
                and gpu.status.pci_info.address == card
            ):
                self.channel.send(str(gpu.metadata.name))

    def all_changed(self) -> None:
        """Every card of the node is read again (a node-wide fact changed: its IMEX channels)."""
        for gpu in self._gpus.store.list():
            self.channel.send(str(gpu.metadata.name))
