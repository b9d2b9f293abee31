"""A whole card passed through to a VM: its IOMMU group on ``vfio-pci``, and the VM's files.

Whether a claim may have passthrough, and which functions go with the card, is decided while the
claim is planned (:mod:`~pkg.gpuhandler.preparation.vfio_plan`); the record then names the IOMMU
group and every function's driver from before the first bind, written before anything is bound,
so a release after a crash at any point gives every function back to the driver it had.

Prepare takes the card whole (out of MIG mode), binds every function of the group to
``vfio-pci`` (``driver_override``, unbind, bind), waits for ``/dev/vfio/<group>``, and writes
the claim's device metadata and QEMU hook input (:mod:`~pkg.gpuhandler.preparation.vm_metadata`).
The container gets ``/dev/vfio/vfio`` and ``/dev/vfio/<group>`` — not the NVIDIA device nodes: the
card is no longer on the nvidia driver — and the VM files, mounted read-only. Release gives every
function back to its original driver with the override cleared, last first, and removes the
claim's VM files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork
from pkg.gpuhandler.preparation.kinds.vm_devices import vfio_nodes, vm_mounts
from pkg.gpuhandler.preparation.kinds.whole_card import take_whole_card
from pkg.gpuhandler.preparation.services import OfferIndex
from pkg.gpuhandler.preparation.vm_metadata import VmFiles
from pkg.hardware.pci_binding import VFIO_PCI, PciDriverBinding

logger = logging.getLogger(__name__)

REASON_BIND: str = "VfioBindFailed"


class VfioKind:
    name = "passed-through card"
    record_field = "vfio"

    def __init__(
        self,
        *,
        preparer: CardPreparer,
        binding: PciDriverBinding,
        files: VmFiles,
        offers: OfferIndex,
        dev_root: Path,
        settle_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._preparer = preparer
        self._binding = binding
        self._files = files
        self._offers = offers
        self._dev = dev_root
        self._settle_timeout = settle_timeout
        self._clock = clock

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        assert device.vfio is not None
        take_whole_card(self._preparer, device, work)
        record = work.record
        for function in device.vfio.functions:
            try:
                self._binding.bind(function.address, VFIO_PCI)
            except (OSError, ValueError) as exc:
                raise PrepareFailedError(
                    REASON_BIND,
                    f"claim {record.namespace}/{record.name}: binding {function.address} "
                    f"to {VFIO_PCI}: {exc}",
                ) from None
            work.changed_cards.add(device.card)
        nodes = vfio_nodes(
            self._dev,
            device.vfio.iommu_group,
            timeout=self._settle_timeout,
            clock=self._clock,
            what=f"claim {record.namespace}/{record.name}: after binding card {device.card} to {VFIO_PCI}",
        )
        return ContainerEdits(
            device_nodes=nodes,
            mounts=vm_mounts(self._files, self._offers, device, work),
        )

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        assert device.vfio is not None
        for function in reversed(device.vfio.functions):
            before = self._binding.driver(function.address)
            self._binding.restore(function.address, function.driver)
            if before != function.driver:
                work.changed_cards.add(device.card)
                logger.info(
                    "gave a function back to its driver",
                    extra={
                        "pci_address": function.address,
                        "driver": function.driver,
                        "claim": str(work.record),
                    },
                )
        self._files.remove(work.record.uid)
