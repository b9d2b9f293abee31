"""The VFIO steps of Prepare and Unprepare (DESIGN §6); each does nothing for a claim without VFIO.

Prepare:

* ``plan-vfio`` (after ``plan``) — reads the Pods reserving the claim; when one asks for VFIO,
  checks the rules of :mod:`vfio` and puts each device's IOMMU group and its functions' present
  drivers into the plan, which ``record-started`` writes to the checkpoint *before* anything is
  bound: from then on a crash at any point leaves a record that says what to give back;
* ``bind-vfio`` (after ``prepare-devices``) — every function of the group to ``vfio-pci``
  (``driver_override``, unbind, bind), then ``/dev/vfio/<group>`` must exist; the container gets
  ``/dev/vfio/vfio`` and ``/dev/vfio/<group>`` instead of the NVIDIA nodes. Its rollback gives the
  functions back;
* ``write-vm-metadata`` (before ``write-cdi-spec``) — the device metadata and the QEMU hook input
  (:mod:`vm_metadata`), mounted read-only through the claim's CDI spec.

Unprepare: ``release-vfio`` gives every recorded function back to its original driver with the
override cleared, and ``remove-vm-metadata`` removes the files. Both are idempotent, so the
kubelet's retry or start-up finishes what a crash interrupted. :func:`release_vfio` is shared with
the rollback and start-up.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes.client import V1Device

from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.framework.steptaker import Continue, StepOutcome
from pkg.gpuhandler.preparation.allocation import ClaimPlan, VfioFunction, VfioPlan
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord, DeviceRecord
from pkg.gpuhandler.preparation.context import StepContext
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.services import OfferIndex, PodReader
from pkg.gpuhandler.preparation.vfio import HostKind, plan_vfio, vfio_requested
from pkg.gpuhandler.preparation.vm_metadata import VmFiles
from pkg.hardware.pci_binding import VFIO_PCI, PciDriverBinding

logger = logging.getLogger(__name__)

REASON_BIND: str = "VfioBindFailed"


class PlanVfio:
    name = "plan-vfio"

    def __init__(self, *, pods: PodReader, host: HostKind, sysfs_root: Path) -> None:
        self._pods = pods
        self._host = host
        self._sysfs_root = sysfs_root

    def take(self, ctx: StepContext) -> StepOutcome:
        resource = ctx.require(ctx.resource, "the claim", self.name)
        plan = ctx.require(ctx.plan, "the plan", self.name)
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        if not vfio_requested(resource, self._pods):
            return Continue()
        plan = plan_vfio(plan, host=self._host, sysfs_root=self._sysfs_root)
        earlier = checkpoint.claims.get(plan.uid)
        if earlier is not None:
            plan = _with_recorded_drivers(plan, earlier)
        ctx.plan = plan
        return Continue()


def _with_recorded_drivers(plan: ClaimPlan, earlier: ClaimRecord) -> ClaimPlan:
    """``plan`` with the functions' drivers as an earlier, unfinished attempt recorded them: from
    before its first bind, which sysfs no longer shows while a function is still on vfio-pci."""
    recorded = {d.device: d.vfio for d in earlier.devices if d.vfio is not None}
    devices = []
    for planned in plan.devices:
        found = recorded.get(planned.device)
        if found is None or planned.vfio is None:
            devices.append(planned)
            continue
        functions = tuple(VfioFunction(address=f.address, driver=f.driver) for f in found.functions)
        vfio = VfioPlan(iommu_group=found.iommu_group, functions=functions)
        devices.append(dataclasses.replace(planned, vfio=vfio))
    return dataclasses.replace(plan, devices=tuple(devices))


def release_vfio(record: ClaimRecord, binding: PciDriverBinding) -> list[str]:
    """Gives every VFIO function of ``record`` back to its original driver, last first; returns the
    cards changed. Idempotent: a function already back is left alone."""
    changed = []
    for device in reversed(record.devices):
        if device.vfio is None:
            continue
        for function in reversed(device.vfio.functions):
            before = binding.driver(function.address)
            binding.restore(function.address, function.driver)
            if before != function.driver:
                changed.append(device.card)
                logger.info(
                    "gave a function back to its driver",
                    extra={"pci_address": function.address, "driver": function.driver, "claim": str(record)},
                )
    return sorted(set(changed))


class BindVfio:
    name = "bind-vfio"

    def __init__(
        self,
        *,
        binding: PciDriverBinding,
        dev_root: Path,
        settle_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._binding = binding
        self._dev = dev_root
        self._settle_timeout = settle_timeout
        self._clock = clock

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims[ctx.claim.uid]
        try:
            for device in record.devices:
                if device.vfio is not None:
                    ctx.edits[device.device] = self._bind(ctx, record, device)
        except Exception:
            self.rollback(ctx)
            raise
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        record = checkpoint.claims.get(ctx.claim.uid)
        if record is not None:
            ctx.changed_cards.update(release_vfio(record, self._binding))

    def _bind(self, ctx: StepContext, record: ClaimRecord, device: DeviceRecord) -> ContainerEdits:
        assert device.vfio is not None
        for function in device.vfio.functions:
            try:
                self._binding.bind(function.address, VFIO_PCI)
            except (OSError, ValueError) as exc:
                raise PrepareFailedError(
                    REASON_BIND,
                    f"claim {record.namespace}/{record.name}: binding {function.address} "
                    f"to {VFIO_PCI}: {exc}",
                ) from None
            ctx.changed_cards.add(device.card)
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
            )
        )


class WriteVmMetadata:
    name = "write-vm-metadata"

    def __init__(self, *, files: VmFiles, offers: OfferIndex) -> None:
        self._files = files
        self._offers = offers

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        resource = ctx.require(ctx.resource, "the claim", self.name)
        record = checkpoint.claims[ctx.claim.uid]
        requests: dict[str, list[tuple[DeviceRecord, V1Device | None]]] = {}
        for device in record.devices:
            if device.vfio is not None:
                offer = self._offers.device(device.pool, device.device)
                requests.setdefault(device.requests[0], []).append((device, offer))
        if not requests:
            return Continue()
        try:
            mounts = self._files.write(resource, requests)
        except Exception:
            self.rollback(ctx)
            raise
        for name, found in mounts.items():
            ctx.edits[name] = dataclasses.replace(ctx.edits[name], mounts=ctx.edits[name].mounts + found)
        return Continue()

    def rollback(self, ctx: StepContext) -> None:
        self._files.remove(ctx.claim.uid)


class ReleaseVfio:
    name = "release-vfio"

    def __init__(self, binding: PciDriverBinding) -> None:
        self._binding = binding

    def take(self, ctx: StepContext) -> StepOutcome:
        checkpoint = ctx.require(ctx.checkpoint, "the checkpoint", self.name)
        ctx.changed_cards.update(release_vfio(checkpoint.claims[ctx.claim.uid], self._binding))
        return Continue()


class RemoveVmMetadata:
    name = "remove-vm-metadata"

    def __init__(self, files: VmFiles) -> None:
        self._files = files

    def take(self, ctx: StepContext) -> StepOutcome:
        self._files.remove(ctx.claim.uid)
        return Continue()
