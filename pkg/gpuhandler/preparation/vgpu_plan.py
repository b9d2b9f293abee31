"""vGPUs of a claim: who may have them, and the mdev UUID each will be created with.

A vGPU is a device only a VM can use (its guest runs NVIDIA's vGPU driver; a container has
nothing to open), so it follows the opt-in of VFIO passthrough: the Pods reserving the claim
carry ``gpu.deckhouse.io/vfio: "true"`` (:func:`~.vfio_plan.vfio_requested`). A claim with a
vGPU for any other Pod is refused with ``VgpuNotAllowed``.

The UUID is chosen here, while planning, so ``record-started`` writes it to the checkpoint before
the kind writes it to ``create``: whatever a crash leaves — no mdev, or the mdev — is named by a
record, so start-up removes exactly the mdevs we made and nothing else. A retry of a claim whose
``PrepareStarted`` record is still there (its rollback could not remove the mdev) keeps the
recorded UUID, so it finds and owns the mdev instead of making a second one.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from pkg.gpuhandler.preparation.checkpoint import ClaimRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.plan import ClaimPlan
from pkg.gpuhandler.preparation.vfio_plan import VFIO_ANNOTATION
from pkg.hardware.mdev import new_mdev_uuid

REASON_NOT_ALLOWED: Final = "VgpuNotAllowed"


def plan_vgpus(plan: ClaimPlan, *, for_vm: bool, earlier: ClaimRecord | None) -> ClaimPlan:
    """``plan`` with a UUID for every vGPU (the recorded one on a retry); refused unless ``for_vm``."""
    vgpus = [d for d in plan.devices if d.vgpu is not None]
    if not vgpus:
        return plan
    if not for_vm:
        raise PrepareFailedError(
            REASON_NOT_ALLOWED,
            f"claim {plan}: device {vgpus[0].device} is a vGPU, which only a VM can use; the Pod "
            f'must be a VM\'s launcher annotated {VFIO_ANNOTATION}: "true"',
        )
    recorded = {
        d.device: d.vgpu.mdev_uuid for d in (earlier.devices if earlier else []) if d.vgpu is not None
    }
    devices = []
    for planned in plan.devices:
        if planned.vgpu is not None:
            uuid = recorded.get(planned.device) or new_mdev_uuid()
            vgpu = dataclasses.replace(planned.vgpu, mdev_uuid=uuid)
            devices.append(dataclasses.replace(planned, vgpu=vgpu))
        else:
            devices.append(planned)
    return dataclasses.replace(plan, devices=tuple(devices))
