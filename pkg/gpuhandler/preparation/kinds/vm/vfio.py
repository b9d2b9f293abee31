"""A whole card passed through to a VM: its IOMMU group on ``vfio-pci``, and the VM's files.

VFIO is an option of the exclusive Physical offer, not an offer of its own (a card for a VM is an
exclusive whole card that its Pod uses differently): this kind takes such an offer when the Pods
reserving the claim ask for a VM's devices (:func:`~...plan.vm_requested`). It is granted only when
all of these hold, and refused otherwise with ``VfioNotAllowed`` and a sentence naming the rule:

* every device of the claim is for the VM (the planner refuses a MIG device or a share in a VM's
  claim: a card handed to a VM is gone for every container);
* the node is bare metal **from positive evidence** (:func:`~pkg.hardware.hostinfo.classify`):
  unknown counts as a VM, because a VM's virtual IOMMU cannot isolate a passed-through device;
* the card has no SR-IOV virtual functions enabled (VFs would be orphaned, or passed to others);
* the card has an IOMMU group and every function in it can be bound too: the group is the unit
  of isolation, so the card's other functions (the HDMI audio function of a workstation card) go
  to ``vfio-pci`` with it. PCI-to-PCI bridges stay with their driver (the kernel allows that); a
  host or other bridge, or another GPU in the group, makes the card impossible to pass through
  alone.

The plan is the record (:class:`VfioRecord`): the group and each function's driver now, written
before anything is bound, so Unprepare — or start-up after a crash at any point — gives every
function back to the driver it had. A retry keeps the drivers an earlier, unfinished attempt
recorded, which sysfs no longer shows while a function is still on ``vfio-pci``.

Prepare takes the card whole (out of MIG mode), binds every function of the group to
``vfio-pci`` (``driver_override``, unbind, bind), waits for ``/dev/vfio/<group>``, and writes
the claim's device metadata and QEMU hook input (:mod:`.files`). The container gets
``/dev/vfio/vfio`` and ``/dev/vfio/<group>`` — not the NVIDIA device nodes: the card is no longer
on the nvidia driver — and the VM files, mounted read-only. Release gives every function back to
its original driver with the override cleared, last first, and removes the claim's VM files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Protocol

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import (
    ClaimWork,
    Consumer,
    DeviceKind,
    NodeReport,
    Offer,
    OfferMatch,
    PlanContext,
    record_of,
)
from pkg.gpuhandler.preparation.kinds.vm.devices import vfio_nodes, vm_mounts
from pkg.gpuhandler.preparation.kinds.vm.files import VmFiles
from pkg.gpuhandler.preparation.kinds.vm.holds import VfioHolds
from pkg.gpuhandler.preparation.kinds.vm.records import VFIO_FIELD, VfioFunctionRecord, VfioRecord, vfio_of
from pkg.gpuhandler.preparation.kinds.whole_card import take_whole_card
from pkg.gpuhandler.preparation.services import OfferIndex
from pkg.hardware.hostinfo import classify, read_cpu_flags, read_dmi
from pkg.hardware.pci import PciDevice, iommu_group_members, read_pci_device
from pkg.hardware.pci_binding import VFIO_PCI, PciDriverBinding

logger = logging.getLogger(__name__)

REASON_BIND: Final = "VfioBindFailed"
REASON_NOT_ALLOWED: Final = "VfioNotAllowed"
ORPHAN_VM_FILES: Final = "orphan VM files removed"
_PCI_BRIDGE = "0604"  # PCI-to-PCI bridge: may stay with pcieport in a viable group
_BRIDGE_CLASS = "06"
_DISPLAY_CLASS = "03"


class HostKind(Protocol):
    def bare_metal(self) -> tuple[bool, str]:
        """Whether the node is bare metal, and the rule that decided (for the refusal's message)."""
        ...


class HostFiles:
    """Bare metal from the host's DMI strings and CPU flags, read fresh (positive evidence only)."""

    def __init__(self, *, sysfs_root: Path, proc_root: Path) -> None:
        self._dmi = sysfs_root / "class" / "dmi" / "id"
        self._cpuinfo = proc_root / "cpuinfo"

    def bare_metal(self) -> tuple[bool, str]:
        return classify(dmi=read_dmi(self._dmi), cpu_flags=read_cpu_flags(self._cpuinfo))


class VfioKind(DeviceKind):
    name = "passed-through card"
    offers = OfferMatch("Physical", shared=False, for_vm=True)
    record_field = VFIO_FIELD
    record_model = VfioRecord
    node_step = "orphan-vm-files"
    reader_version = 3  # an older reader would leave the functions on vfio-pci
    consumer = Consumer.VM

    def __init__(
        self,
        *,
        preparer: CardPreparer,
        binding: PciDriverBinding,
        host: HostKind,
        sysfs_root: Path,
        holds: VfioHolds,
        files: VmFiles,
        offers: OfferIndex,
        dev_root: Path,
        settle_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._preparer = preparer
        self._binding = binding
        self._host = host
        self._sysfs_root = sysfs_root
        self._holds = holds
        self._files = files
        self._offers = offers
        self._dev = dev_root
        self._settle_timeout = settle_timeout
        self._clock = clock

    def plan(self, offer: Offer, context: PlanContext) -> VfioRecord:
        label = f"{context.label}: VFIO"
        bare_metal, why = self._host.bare_metal()
        if not bare_metal:
            raise PrepareFailedError(
                REASON_NOT_ALLOWED, f"{label} is allowed only on bare metal, and this node is not: {why}"
            )
        earlier = context.earlier_device(offer.name)
        recorded = vfio_of(earlier) if earlier is not None else None
        if recorded is not None:  # the drivers from before the first bind, which sysfs no longer shows
            return recorded.model_copy(deep=True)
        return _group_of(offer.card, self._sysfs_root, label)

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        vfio = record_of(device, VfioKind, VfioRecord)
        take_whole_card(self._preparer, device, work)
        record = work.record
        self._holds.hold(device.card)  # before it leaves the driver: held, not lost
        for function in vfio.functions:
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
            vfio.iommu_group,
            timeout=self._settle_timeout,
            clock=self._clock,
            what=f"claim {record.namespace}/{record.name}: after binding card {device.card} to {VFIO_PCI}",
        )
        return ContainerEdits(
            device_nodes=nodes,
            mounts=vm_mounts(self._files, self._offers, device, work),
        )

    def follow(self, checkpoint: CheckpointData) -> None:
        """The cards held for VMs as the record says now."""
        self._holds.update(checkpoint)

    def reconcile_node(self, checkpoint: CheckpointData, cards: Sequence[str]) -> NodeReport:
        """The cards held as the remaining records say (until now nothing is held), and the VM
        files (of passed-through cards and vGPUs alike) no recorded claim owns removed: the
        functions themselves are given back by their records' release."""
        self._holds.update(checkpoint)
        report = NodeReport()
        for uid in self._files.remove_all_but(list(checkpoint.claims)):
            report.add(ORPHAN_VM_FILES, uid)
            logger.info("removed VM metadata no claim owns", extra={"claim_uid": uid})
        return report

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        vfio = record_of(device, VfioKind, VfioRecord)
        for function in reversed(vfio.functions):
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
        self._holds.returned(device.card)
        self._files.remove(work.record.uid)


def _group_of(address: str, sysfs_root: Path, label: str) -> VfioRecord:
    card = read_pci_device(sysfs_root, address)
    if card is None:
        raise PrepareFailedError(REASON_NOT_ALLOWED, f"{label}: card {address} cannot be read in sysfs")
    if card.sriov_numvfs:
        raise PrepareFailedError(
            REASON_NOT_ALLOWED,
            f"{label}: card {card.address} has {card.sriov_numvfs} SR-IOV virtual functions enabled; "
            "disable them (sriov_numvfs=0) first",
        )
    if card.iommu_group is None:
        raise PrepareFailedError(
            REASON_NOT_ALLOWED,
            f"{label}: card {card.address} has no IOMMU group; turn the IOMMU on "
            "(intel_iommu=on or amd_iommu=on, and VT-d/AMD-Vi in the firmware)",
        )
    try:
        members = iommu_group_members(sysfs_root, card.iommu_group)
    except OSError as exc:
        raise PrepareFailedError(
            REASON_NOT_ALLOWED, f"{label}: IOMMU group {card.iommu_group} cannot be listed: {exc}"
        ) from None
    functions = [VfioFunctionRecord(address=card.address, driver=card.driver)]
    for member_address in members:
        if member_address == card.address:
            continue
        member = read_pci_device(sysfs_root, member_address)
        problem = _cannot_bind(member, member_address)
        if problem is not None:
            raise PrepareFailedError(
                REASON_NOT_ALLOWED,
                f"{label}: card {card.address} shares IOMMU group {card.iommu_group} with {problem}; "
                "the whole group would go to the VM",
            )
        if member is not None and member.class_code != _PCI_BRIDGE:
            functions.append(VfioFunctionRecord(address=member.address, driver=member.driver))
    return VfioRecord(iommu_group=card.iommu_group, functions=functions)


def _cannot_bind(member: PciDevice | None, address: str) -> str | None:
    if member is None:
        return f"function {address}, which cannot be read"
    if member.class_code.startswith(_DISPLAY_CLASS):
        return f"another GPU, {address}"
    if member.class_code.startswith(_BRIDGE_CLASS) and member.class_code != _PCI_BRIDGE:
        return f"bridge {address} (class {member.class_code}), which the host needs"
    return None
