"""Which vGPU types a card offers: read from the kernel's mdev files, never guessed from a model.

A card is in vGPU mode when NVIDIA's vGPU manager (the host driver, still called ``nvidia``)
registered it with the mediated-device framework, so ``<card>/mdev_supported_types/`` lists
types (:mod:`pkg.hardware.mdev`). Only types the offer model can size are offered: a
``vfio-pci`` device API, and a framebuffer and ``max_instance`` in the manager's description.
And only types the card can take now or already holds: the kernel's ``available_instances`` is 0
for a type that cannot join the vGPUs on the card (the manager's equal-size mode), so once a card
has vGPUs of one type, the other types' offers are withdrawn until it has none again; the offers
of a type with vGPUs stay, so an allocated offer never disappears under its claim.

A card that exposes vGPUs through SR-IOV virtual functions instead (Ada, Hopper and newer under
vGPU 17+: ``<VF>/nvidia/creatable_vgpu_types``) is not offered as vGPUs: that layout is not
implemented (docs/vgpu.md). It is logged, once per card, so an operator sees why.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pkg.dra.model.card import VgpuTypeSpec
from pkg.hardware.mdev import VgpuLayout, mdev_types, vgpu_layout

logger = logging.getLogger(__name__)

_refused: set[str] = set()


def vgpu_types_of(sysfs_root: Path, address: str) -> tuple[VgpuTypeSpec, ...]:
    """The vGPU types the card at ``address`` is offered as; empty when it is not in vGPU mode."""
    try:
        layout = vgpu_layout(sysfs_root, address)
    except OSError:
        return ()
    if layout is VgpuLayout.SRIOV_VF:
        if address not in _refused:
            _refused.add(address)
            logger.warning(
                "card exposes vGPUs through SR-IOV virtual functions, which are not offered; "
                "only mdev-based vGPU is implemented (docs/vgpu.md)",
                extra={"pci_address": address},
            )
        return ()
    if layout is not VgpuLayout.MDEV:
        return ()
    return tuple(
        VgpuTypeSpec(t.type_id, t.name, t.framebuffer_mib, t.max_instances)
        for t in mdev_types(sysfs_root, address)
        if t.device_api == "vfio-pci"
        and t.framebuffer_mib
        and t.max_instances
        and (t.available_instances > 0 or t.created > 0)
    )
