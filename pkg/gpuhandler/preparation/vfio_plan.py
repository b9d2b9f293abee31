"""VFIO passthrough: who asks for it, whether this node may grant it, and what must be bound.

VFIO is an option of the exclusive Physical offer, not an offer of its own (a card for a VM is an
exclusive whole card that its Pod uses differently): the Pod that reserves the claim
(``status.reservedFor``) asks with the annotation ``gpu.deckhouse.io/vfio: "true"`` — the
scheduler's claims for extended resources carry no annotations of their own. It is granted
only when all of these hold, and refused otherwise with ``VfioNotAllowed`` and a sentence
naming the rule:

* every device of the claim is a whole card, allocated exclusively (not MIG, not a share): a card
  handed to a VM is gone for every container;
* the node is bare metal **from positive evidence** (:func:`~pkg.hardware.hostinfo.classify`):
  unknown counts as a VM, because a VM's virtual IOMMU cannot isolate a passed-through device;
* the card has no SR-IOV virtual functions enabled (VFs would be orphaned, or passed to others);
* the card has an IOMMU group and every function in it can be bound too: the group is the unit
  of isolation, so the card's other functions (the HDMI audio function of a workstation card) go
  to ``vfio-pci`` with it. PCI-to-PCI bridges stay with their driver (the kernel allows that); a
  host or other bridge, or another GPU in the group, makes the card impossible to pass through
  alone.

The result is a :class:`~.plan.VfioPlan` per device: the group and each function's driver now, which
the checkpoint records before anything is bound, so Unprepare — or start-up after a crash at any
point — gives every function back to the driver it had.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Final, Protocol

from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta

from api.gpu.v1alpha1 import DeviceType, SharingStrategy
from pkg.framework.client import NotFoundError
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.plan import ClaimPlan, PlannedDevice, VfioFunction, VfioPlan
from pkg.gpuhandler.preparation.services import PodReader
from pkg.hardware.hostinfo import classify, read_cpu_flags, read_dmi
from pkg.hardware.pci import PciDevice, iommu_group_members, read_pci_device

VFIO_ANNOTATION: Final = "gpu.deckhouse.io/vfio"
REASON_NOT_ALLOWED: Final = "VfioNotAllowed"
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


def vfio_requested(claim: ResourceV1ResourceClaim, pods: PodReader) -> bool:
    """Whether the Pods reserving ``claim`` ask for VFIO; they must agree, and say "true" or "false"."""
    meta = claim.metadata or V1ObjectMeta()
    label = f"claim {meta.namespace}/{meta.name}"
    answers: dict[str, bool] = {}
    for consumer in (claim.status.reserved_for if claim.status else None) or []:
        if consumer.resource != "pods" or (consumer.api_group or "") != "":
            continue
        try:
            pod = pods.get(str(meta.namespace), consumer.name)
        except NotFoundError:
            continue  # gone already: it asks for nothing
        if pod.metadata is None or pod.metadata.uid != consumer.uid:
            continue
        value = (pod.metadata.annotations or {}).get(VFIO_ANNOTATION)
        if value is None:
            answers[consumer.name] = False
        elif value.strip().lower() in ("true", "false"):
            answers[consumer.name] = value.strip().lower() == "true"
        else:
            raise PrepareFailedError(
                "InvalidAllocation",
                f'{label}: Pod {consumer.name} has annotation {VFIO_ANNOTATION}="{value}"; '
                'use "true" or "false"',
            )
    if len(set(answers.values())) > 1:
        asking = sorted(name for name, wants in answers.items() if wants)
        others = sorted(name for name, wants in answers.items() if not wants)
        raise PrepareFailedError(
            REASON_NOT_ALLOWED,
            f"{label}: Pods {asking} ask for VFIO but Pods {others} share the claim without it; "
            "a card bound to vfio-pci serves one VM only",
        )
    return any(answers.values())


def plan_vfio(plan: ClaimPlan, *, host: HostKind, sysfs_root: Path) -> ClaimPlan:
    """``plan`` with every device's :class:`VfioPlan`, or :class:`PrepareFailedError` naming the rule."""
    label = f"claim {plan}: VFIO"
    for device in plan.devices:
        if device.vgpu is not None:
            continue  # a VM's vGPU: made by its own kind (:mod:`.vgpu_plan`)
        if device.device_type is not DeviceType.PHYSICAL or device.sharing is not SharingStrategy.EXCLUSIVE:
            kind = (
                "a MIG device" if device.device_type is DeviceType.MIG else f"a {device.sharing.value} share"
            )
            raise PrepareFailedError(
                REASON_NOT_ALLOWED,
                f"{label} needs a whole card allocated exclusively, but device {device.device} is {kind}",
            )
    bare_metal, why = host.bare_metal()
    if not bare_metal:
        raise PrepareFailedError(
            REASON_NOT_ALLOWED, f"{label} is allowed only on bare metal, and this node is not: {why}"
        )
    devices = [
        device
        if device.vgpu is not None
        else dataclasses.replace(device, vfio=_group_of(device, sysfs_root, label))
        for device in plan.devices
    ]
    return dataclasses.replace(plan, devices=tuple(devices))


def _group_of(device: PlannedDevice, sysfs_root: Path, label: str) -> VfioPlan:
    card = read_pci_device(sysfs_root, device.card)
    if card is None:
        raise PrepareFailedError(REASON_NOT_ALLOWED, f"{label}: card {device.card} cannot be read in sysfs")
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
    functions = [VfioFunction(address=card.address, driver=card.driver)]
    for address in members:
        if address == card.address:
            continue
        member = read_pci_device(sysfs_root, address)
        problem = _cannot_bind(member, address)
        if problem is not None:
            raise PrepareFailedError(
                REASON_NOT_ALLOWED,
                f"{label}: card {card.address} shares IOMMU group {card.iommu_group} with {problem}; "
                "the whole group would go to the VM",
            )
        if member is not None and member.class_code != _PCI_BRIDGE:
            functions.append(VfioFunction(address=member.address, driver=member.driver))
    return VfioPlan(iommu_group=card.iommu_group, functions=tuple(functions))


def _cannot_bind(member: PciDevice | None, address: str) -> str | None:
    if member is None:
        return f"function {address}, which cannot be read"
    if member.class_code.startswith(_DISPLAY_CLASS):
        return f"another GPU, {address}"
    if member.class_code.startswith(_BRIDGE_CLASS) and member.class_code != _PCI_BRIDGE:
        return f"bridge {address} (class {member.class_code}), which the host needs"
    return None
