"""NodePrepare's work on an NVIDIA card, over NVML: MIG mode, MIG devices, what containers get.

Device nodes a container of an NVIDIA device gets, as the NVIDIA container toolkit gives them:

* the whole card: ``/dev/nvidia<minor>``, ``/dev/nvidiactl`` (both required) and, where the host
  has them, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools`` and ``/dev/nvidia-modeset``; the card's
  UUID in ``NVIDIA_VISIBLE_DEVICES``;
* a MIG device: the same, plus the two capability nodes that grant access to its GPU instance and
  compute instance, ``/dev/nvidia-caps/nvidia-cap<m>``, where ``m`` comes from the driver's table
  ``/proc/driver/nvidia-caps/mig-minors`` (``gpu<minor>/gi<G>/access`` and
  ``gpu<minor>/gi<G>/ci<C>/access``); the MIG UUID in ``NVIDIA_VISIBLE_DEVICES``.

A missing capability node is made with mknod (the ``nvidia-caps`` major from ``/proc/devices``),
as ``nvidia-modprobe`` would: the driver creates the table entries, not the nodes. The host paths
are under ``dev_root`` and ``proc_root``, ``/dev`` and ``/proc`` on a real node; the gpu-handler
sees the host's ``/dev`` at the same path it gives the runtime, so a node's host path is also its
path here.

Shares of a whole card (:mod:`pkg.backends.nvidia.sharing` has the tools):

* TimeSlicing: the card's compute mode back to ``DEFAULT`` and its time slice set; a container
  gets what a whole-card container gets;
* MPS: the card in ``EXCLUSIVE_PROCESS`` compute mode, so only the MPS server opens it, and one
  control daemon per card in its folders; a container additionally gets the daemon's pipe folder
  at ``/tmp/nvidia-mps``, its shared-memory folder at ``/dev/shm`` and its limits
  (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` for device 0, the
  only device it sees, in MPS's ``M`` unit of 2^20 bytes).

The driver's user space (libraries, tools, firmware) is not a device's: every container of a device
gets it from the node's base CDI spec (:mod:`pkg.backends.nvidia.driver_root`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from api.gpu.v1alpha1 import TimeSlicingInterval
from pkg.backends.nvidia.nvml_port import (
    COMPUTE_MODE_DEFAULT,
    COMPUTE_MODE_EXCLUSIVE_PROCESS,
    MIG_DISABLED,
    MIG_ENABLED,
    Nvml,
    NvmlError,
    NvmlReturn,
)
from pkg.backends.nvidia.sharing import (
    PID_FILE,
    MpsControl,
    NvidiaMpsControl,
    NvidiaSmiTimeSlicer,
    SharingToolError,
    TimeSlice,
    TimeSlicer,
)
from pkg.backends.preparation import (
    REASON_CARD_BUSY,
    REASON_DEVICE_NODE,
    REASON_DRIVER,
    REASON_MIG_MODE,
    REASON_NOT_SUPPORTED,
    REASON_PLACEMENT,
    REASON_SHARING,
    ContainerEdits,
    DeviceNode,
    MigDevice,
    Mount,
    MpsFolders,
    MpsLimits,
    PreparationError,
)

logger = logging.getLogger(__name__)

VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
MPS_PIPE_IN_CONTAINER: Final = "/tmp/nvidia-mps"  # MPS's default CUDA_MPS_PIPE_DIRECTORY
SHM_IN_CONTAINER: Final = "/dev/shm"
REQUIRED_CONTROL_NODES: Final = ("nvidiactl",)
OPTIONAL_CONTROL_NODES: Final = ("nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
_CAPS_DEVICE: Final = re.compile(r"^\s*(\d+)\s+nvidia-caps\s*$", re.MULTILINE)


class NvidiaPreparer:
    """:class:`~pkg.backends.preparation.CardPreparer` over an NVML adapter."""

    def __init__(
        self,
        *,
        nvml: Nvml,
        dev_root: Path = Path("/dev"),
        proc_root: Path = Path("/proc"),
        time_slicer: TimeSlicer | None = None,
        mps: MpsControl | None = None,
    ) -> None:
        self._nvml = nvml
        self._dev = dev_root
        self._proc = proc_root
        self._time_slicer = time_slicer or NvidiaSmiTimeSlicer()
        self._mps = mps or NvidiaMpsControl()

    # -- MIG mode ---------------------------------------------------------------------------------

    def mig_enabled(self, address: str) -> bool:
        try:
            current, _pending = self._nvml.mig_mode(address)
        except NvmlError as exc:
            if exc.not_supported:
                return False
            raise _failure(address, REASON_DRIVER, exc) from exc
        return current == MIG_ENABLED

    def set_mig_mode(self, address: str, *, enabled: bool) -> None:
        wanted = MIG_ENABLED if enabled else MIG_DISABLED
        try:
            self._nvml.set_mig_mode(address, wanted)
            current, pending = self._nvml.mig_mode(address)
        except NvmlError as exc:
            reason = REASON_CARD_BUSY if exc.code == NvmlReturn.IN_USE else REASON_MIG_MODE
            if exc.not_supported:
                reason = REASON_NOT_SUPPORTED
            raise _failure(address, reason, exc) from exc
        if current != wanted:  # Ampere without a reset: the change waits for one
            raise PreparationError(
                address=address,
                reason=REASON_MIG_MODE,
                message=f"MIG mode is {current} and {pending} is pending; the card needs a reset",
            )
        logger.info("MIG mode %s", "enabled" if enabled else "disabled", extra={"pci_address": address})

    def processes(self, address: str) -> Sequence[int]:
        try:
            return self._nvml.running_processes(address)
        except NvmlError as exc:
            raise _failure(address, REASON_DRIVER, exc) from exc

    # -- MIG devices ------------------------------------------------------------------------------

    def mig_devices(self, address: str) -> list[MigDevice]:
        if not self.mig_enabled(address):
            return []
        try:
            devices = []
            for gi in self._nvml.gpu_instances(address):
                cis = self._nvml.compute_instances(address, gi.id)
                ci = cis[0].id if cis else None
                uuid = self._nvml.mig_device_uuid(address, gi.id, ci) if ci is not None else None
                devices.append(
                    MigDevice(
                        profile_id=gi.profile_id,
                        start=gi.start,
                        size=gi.size,
                        gpu_instance=gi.id,
                        compute_instance=ci,
                        uuid=uuid,
                    )
                )
        except NvmlError as exc:
            raise _failure(address, REASON_DRIVER, exc) from exc
        return sorted(devices, key=lambda d: d.start)

    def create_mig_device(self, address: str, *, profile_id: int, start: int, size: int) -> MigDevice:
        wanted = set(range(start, start + size))
        existing = next((d for d in self.mig_devices(address) if d.slices() & wanted), None)
        try:
            if existing is None:
                gi = self._nvml.create_gpu_instance(address, profile_id=profile_id, start=start, size=size).id
            elif (existing.profile_id, existing.start, existing.size) == (profile_id, start, size):
                gi = existing.gpu_instance  # made by an attempt that died: complete it
                if existing.complete:
                    return existing
            else:
                raise PreparationError(
                    address=address,
                    reason=REASON_PLACEMENT,
                    message=f"memory slices {sorted(wanted)} are held by GPU instance "
                    f"{existing.gpu_instance} (profile {existing.profile_id} at {existing.start})",
                )
            ci = self._nvml.create_compute_instance(address, gi).id
            uuid = self._nvml.mig_device_uuid(address, gi, ci)
        except NvmlError as exc:
            reason = REASON_PLACEMENT if exc.code == NvmlReturn.INSUFFICIENT_RESOURCES else REASON_DRIVER
            raise _failure(address, reason, exc) from exc
        logger.info(
            "MIG device created",
            extra={"pci_address": address, "profile_id": profile_id, "start": start, "gpu_instance": gi},
        )
        return MigDevice(
            profile_id=profile_id, start=start, size=size, gpu_instance=gi, compute_instance=ci, uuid=uuid
        )

    def destroy_mig_device(self, address: str, *, start: int) -> bool:
        device = next((d for d in self.mig_devices(address) if d.start == start), None)
        if device is None:
            return False
        try:
            for ci in self._nvml.compute_instances(address, device.gpu_instance):
                self._nvml.destroy_compute_instance(address, device.gpu_instance, ci.id)
            self._nvml.destroy_gpu_instance(address, device.gpu_instance)
        except NvmlError as exc:
            if exc.code != NvmlReturn.NOT_FOUND:  # gone meanwhile: what we wanted
                reason = REASON_CARD_BUSY if exc.code == NvmlReturn.IN_USE else REASON_DRIVER
                raise _failure(address, reason, exc) from exc
        logger.info("MIG device destroyed", extra={"pci_address": address, "start": start})
        return True

    # -- what containers get ----------------------------------------------------------------------

    def card_edits(self, address: str) -> ContainerEdits:
        uuid = self._uuid(address)
        return ContainerEdits(device_nodes=self._card_nodes(address), env=((VISIBLE_DEVICES, uuid),))

    def partition_mode(self, address: str) -> str | None:
        """None: NVIDIA cards are partitioned instance by instance (MIG), not by a card-wide mode."""
        return None

    def set_partition_mode(self, address: str, mode: str | None) -> None:
        if mode is not None:
            raise PreparationError(
                address=address, reason=REASON_NOT_SUPPORTED, message="NVIDIA cards have no partition modes"
            )

    def partition_edits(self, address: str, mode: str, index: int) -> ContainerEdits:
        raise PreparationError(
            address=address, reason=REASON_NOT_SUPPORTED, message="NVIDIA cards have no partition modes"
        )

    def mig_edits(self, address: str, device: MigDevice) -> ContainerEdits:
        if not device.complete or device.uuid is None:
            raise PreparationError(
                address=address, reason=REASON_DRIVER, message=f"MIG device at {device.start} is not complete"
            )
        minor = self._minor(address)
        caps = self._mig_minors(address)
        gi_key = f"gpu{minor}/gi{device.gpu_instance}/access"
        ci_key = f"gpu{minor}/gi{device.gpu_instance}/ci{device.compute_instance}/access"
        nodes = list(self._card_nodes(address))
        for key in (gi_key, ci_key):
            if key not in caps:
                raise PreparationError(
                    address=address,
                    reason=REASON_DEVICE_NODE,
                    message=f"the driver lists no capability {key}",
                )
            nodes.append(self._cap_node(address, caps[key]))
        return ContainerEdits(device_nodes=tuple(nodes), env=((VISIBLE_DEVICES, device.uuid),))

    def mps_edits(self, address: str, folders: MpsFolders, limits: MpsLimits) -> ContainerEdits:
        card = self.card_edits(address)
        return ContainerEdits(
            device_nodes=card.device_nodes,
            env=(
                *card.env,
                ("CUDA_MPS_PIPE_DIRECTORY", MPS_PIPE_IN_CONTAINER),
                ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", str(limits.thread_percentage)),
                ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", f"0={limits.memory_limit_mib}M"),
            ),
            mounts=(
                Mount(host_path=str(folders.pipe), container_path=MPS_PIPE_IN_CONTAINER),
                Mount(host_path=str(folders.shm), container_path=SHM_IN_CONTAINER),
            ),
        )

    # -- sharing ----------------------------------------------------------------------------------

    def set_time_slice(self, address: str, interval: TimeSlicingInterval) -> None:
        self._set_compute_mode(address, COMPUTE_MODE_DEFAULT)
        try:
            self._time_slicer.set_time_slice(
                address=address, uuid=self._uuid(address), interval=TimeSlice.of(interval)
            )
        except SharingToolError as exc:
            raise PreparationError(address=address, reason=REASON_SHARING, message=str(exc)) from exc
        logger.info("time slice set", extra={"pci_address": address, "interval": interval.value})

    def start_mps(self, address: str, folders: MpsFolders) -> bool:
        if self._mps.running(folders=folders):
            return False
        uuid = self._uuid(address)
        try:
            for folder, mode in ((folders.pipe, 0o755), (folders.log, 0o755), (folders.shm, 0o1777)):
                folder.mkdir(parents=True, exist_ok=True)
                folder.chmod(mode)
            for leftover in (folders.pipe / PID_FILE, *folders.shm.iterdir()):  # of a daemon that died
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        except OSError as exc:
            raise PreparationError(address=address, reason=REASON_SHARING, message=str(exc)) from exc
        self._set_compute_mode(address, COMPUTE_MODE_EXCLUSIVE_PROCESS)
        try:
            self._mps.start(uuid=uuid, folders=folders)
        except SharingToolError as exc:
            with contextlib.suppress(PreparationError):
                self._set_compute_mode(address, COMPUTE_MODE_DEFAULT)
            raise PreparationError(address=address, reason=REASON_SHARING, message=str(exc)) from exc
        logger.info("MPS control daemon started", extra={"pci_address": address, "folder": str(folders.root)})
        return True

    def stop_mps(self, address: str, folders: MpsFolders) -> bool:
        was_running = self._mps.running(folders=folders)
        try:
            self._mps.quit(folders=folders)
        except SharingToolError as exc:
            raise PreparationError(address=address, reason=REASON_SHARING, message=str(exc)) from exc
        self._set_compute_mode(address, COMPUTE_MODE_DEFAULT)
        try:
            shutil.rmtree(folders.root)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise PreparationError(address=address, reason=REASON_SHARING, message=str(exc)) from exc
        if was_running:
            logger.info("MPS control daemon stopped", extra={"pci_address": address})
        return was_running

    def mps_running(self, folders: MpsFolders) -> bool:
        return self._mps.running(folders=folders)

    def _set_compute_mode(self, address: str, mode: int) -> None:
        try:
            if self._nvml.compute_mode(address) != mode:
                self._nvml.set_compute_mode(address, mode)
        except NvmlError as exc:
            reason = REASON_NOT_SUPPORTED if exc.not_supported else REASON_SHARING
            raise _failure(address, reason, exc) from exc

    def _uuid(self, address: str) -> str:
        try:
            return self._nvml.uuid(address)
        except NvmlError as exc:
            raise _failure(address, REASON_DRIVER, exc) from exc

    def _card_nodes(self, address: str) -> tuple[DeviceNode, ...]:
        minor = self._minor(address)
        nodes = [self._existing(address, f"nvidia{minor}")]
        nodes += [self._existing(address, name) for name in REQUIRED_CONTROL_NODES]
        nodes += [self._node(name) for name in OPTIONAL_CONTROL_NODES if (self._dev / name).exists()]
        return tuple(nodes)

    def _minor(self, address: str) -> int:
        try:
            return self._nvml.minor_number(address)
        except NvmlError as exc:
            raise _failure(address, REASON_DRIVER, exc) from exc

    def _node(self, name: str) -> DeviceNode:
        return DeviceNode(path=f"/dev/{name}", host_path=str(self._dev / name))

    def _existing(self, address: str, name: str) -> DeviceNode:
        if not (self._dev / name).is_char_device():
            raise PreparationError(
                address=address,
                reason=REASON_DEVICE_NODE,
                message=f"device node {self._dev / name} is missing",
            )
        return self._node(name)

    def _mig_minors(self, address: str) -> dict[str, int]:
        path = self._proc / "driver" / "nvidia-caps" / "mig-minors"
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise PreparationError(
                address=address, reason=REASON_DEVICE_NODE, message=f"{path}: {exc}"
            ) from exc
        table = {}
        for line in lines:
            name, _, minor = line.strip().rpartition(" ")
            if name and minor.isdigit():
                table[name] = int(minor)
        return table

    def _cap_node(self, address: str, minor: int) -> DeviceNode:
        name = f"nvidia-caps/nvidia-cap{minor}"
        path = self._dev / name
        if not path.is_char_device():
            major = self._caps_major(address)
            path.parent.mkdir(mode=0o755, exist_ok=True)
            try:
                os.mknod(path, 0o444 | stat.S_IFCHR, os.makedev(major, minor))
            except FileExistsError:
                pass
            except OSError as exc:
                raise PreparationError(
                    address=address, reason=REASON_DEVICE_NODE, message=f"cannot make {path}: {exc}"
                ) from exc
        return self._node(name)

    def _caps_major(self, address: str) -> int:
        path = self._proc / "devices"
        try:
            match = _CAPS_DEVICE.search(path.read_text())
        except OSError as exc:
            raise PreparationError(
                address=address, reason=REASON_DEVICE_NODE, message=f"{path}: {exc}"
            ) from exc
        if match is None:
            raise PreparationError(
                address=address, reason=REASON_DEVICE_NODE, message=f"{path} lists no nvidia-caps device"
            )
        return int(match.group(1))


def _failure(address: str, reason: str, exc: NvmlError) -> PreparationError:
    return PreparationError(address=address, reason=reason, message=str(exc))
