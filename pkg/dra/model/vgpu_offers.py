"""The vGPU offers of a card in vGPU mode: one device per instance of each vGPU type it lists.

A card whose host driver is NVIDIA's vGPU manager runs no CUDA on the host, so it has no MIG or
shared offers; it is offered as vGPUs (mediated devices, handed to VMs) and, through its Physical
offer, whole for passthrough. Each vGPU type ``t`` the kernel lists with ``max_instance`` ``n`` is
published as ``n`` devices ``<card>-vgpu-<type number>-<i>``, each consuming ``1/n`` of the card's
``memory`` counter (rounded down, so ``n`` of them always fit):

* the Physical offer consumes every counter, so a card with any vGPU allocated is never given
  whole, and a card given whole has no vGPU offer left — the same rule as MIG and shares;
* ``n`` instances of one type fill the card, so no type is over-allocated;
* types of different sizes fit together as far as the framebuffer allows — the rule of the vGPU
  manager's mixed-size (heterogeneous) mode. In its default equal-size mode the manager accepts
  only more of the type already on the card, which shared counters cannot express exactly (every
  pair of instances of different types would need a counter of its own); the kernel's
  ``available_instances`` says it, so the card's types are those it can take now or holds
  (:mod:`pkg.backends.nvidia.vgpu`), and Prepare refuses a vGPU the card cannot take
  (``VgpuTypeConflict``) before anything changes (docs/vgpu.md).

The offers carry ``deviceType: VGPU``, ``sharingStrategy: Exclusive`` (a vGPU is not shared
further, so a GPUClass of deviceType VGPU selects them), the type's name (``vgpuType``) and mdev
type ID (``mdevType``), and the framebuffer as ``memory`` capacity. Not
``resource.kubernetes.io/pciBusID``: KubeVirt reads that as "pass this PCI function through",
while a vGPU is handed over by its ``mdevUUID``, written into the device metadata at Prepare.
"""

from __future__ import annotations

from kubernetes.client import V1DeviceCapacity

from api.gpu.v1alpha1 import DeviceType, SharingStrategy
from pkg.dra.model.attributes import AttributeValue, clip, key, mib_quantity
from pkg.dra.model.card import Card, VgpuTypeSpec


def vgpu_device_name(card: Card, spec: VgpuTypeSpec, instance: int) -> str:
    """``gpu-0000-3b-00-0-vgpu-232-0``: the type's number (its ID's last part) and the instance."""
    number = spec.type_id.rsplit("-", 1)[-1].lower()
    return f"{card.base_name}-vgpu-{number}-{instance}"


def vgpu_memory_share_mib(card: Card, spec: VgpuTypeSpec) -> int:
    """What one instance of ``spec`` consumes of the card's ``memory`` counter."""
    return card.memory_mib // max(spec.max_instances, 1)


def vgpu_attributes(spec: VgpuTypeSpec) -> dict[str, AttributeValue]:
    return {
        key("deviceType"): DeviceType.VGPU.value,
        key("sharingStrategy"): SharingStrategy.EXCLUSIVE.value,
        key("vgpuType"): clip(spec.name),
        key("mdevType"): spec.type_id,
    }


def vgpu_capacity(spec: VgpuTypeSpec) -> dict[str, V1DeviceCapacity]:
    return {"memory": V1DeviceCapacity(value=mib_quantity(spec.framebuffer_mib))}
