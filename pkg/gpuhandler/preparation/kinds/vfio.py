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

from kubernetes.client import V1Device

from pkg.backends.preparation import CardPreparer, ContainerEdits, DeviceNode, Mount
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord, DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork
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
        group = self._dev / "vfio" / device.vfio.iommu_group
        control = self._dev / "vfio" / "vfio"
        deadline = self._clock() + self._settle_timeout
        while not (group.is_char_device() and control.is_char_device()):  # udev may lag the bind
            if self._clock() >= deadline:
                raise PrepareFailedError(
                    "DeviceNodeMissing",
                    f"claim {record.namespace}/{record.name}: {group} or {control} is missing after binding "
                    f"card {device.card} to {VFIO_PCI}",
                )
            time.sleep(0.05)
        return ContainerEdits(
            device_nodes=(
                DeviceNode(path="/dev/vfio/vfio", host_path=str(control)),
                DeviceNode(path=f"/dev/vfio/{device.vfio.iommu_group}", host_path=str(group)),
            ),
            mounts=self._vm_mounts(device, work),
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

    def _vm_mounts(self, device: DeviceRecord, work: ClaimWork) -> tuple[Mount, ...]:
        """Writes the claim's VM files (every passed-through device of it: the hook input lists
        them all) and returns the mounts that ``device``'s container carries."""
        resource = work.resource
        if resource is None:
            raise ValueError(f"claim {work.record}: the VM files need the claim as read from the API server")
        mounts = self._files.write(resource, self._requests(work.record))
        return mounts.get(device.device, ())

    def _requests(self, record: ClaimRecord) -> dict[str, list[tuple[DeviceRecord, V1Device | None]]]:
        requests: dict[str, list[tuple[DeviceRecord, V1Device | None]]] = {}
        for device in record.devices:
            if device.vfio is not None:
                offer = self._offers.device(device.pool, device.device)
                requests.setdefault(device.requests[0], []).append((device, offer))
        return requests
