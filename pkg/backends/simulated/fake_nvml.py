"""A simulated NVML: the :class:`~pkg.backends.nvidia.nvml_port.Nvml` port answered from the data of
real cards, so the real NVIDIA backend runs unchanged in tests and the demo
(docs/architecture.md#hardware-behind-narrow-adapters).

Which card sits at an address is read from sysfs, as the node agent reads it: the function's
``vendor`` and ``device`` files under ``<sysfs-root>/bus/pci/devices/<address>``. Like the real
library, the simulation sees only cards bound to the ``nvidia`` driver: an unbound card, one on
``vfio-pci`` or one of a model it does not know answers ``NOT_FOUND``.

Behaviour that mirrors NVML: memory in bytes, power in milliwatts, MIG mode Disabled unless the
address is in ``mig_enabled``, ``NOT_SUPPORTED`` for queries a model does not offer (MIG on an
L4, retired pages on Ampere and newer, which remap rows instead), and profile queries answered
with MIG disabled only from driver R550 on. UUIDs are derived from node name and address, so
they are stable across restarts and differ between nodes.

What NodePrepare changes lives in :class:`~pkg.backends.simulated.driver_memory.SimulatedDriverMemory`
(shared by every process of the node, as a real driver's state is) and follows NVML's rules: MIG
mode changes only while the card has no processes and no instances (``IN_USE``); a GPU instance is
created only at one of its profile's placements (``INVALID_ARGUMENT``), only on free memory slices
and within the profile's instance count (``INSUFFICIENT_RESOURCES``), only with MIG enabled
(``NOT_SUPPORTED``); a GPU instance with compute instances cannot be destroyed (``IN_USE``); a
missing instance is ``NOT_FOUND``. NVLink: a card of an SXM model has its links
(:data:`~pkg.backends.simulated.data.NVLINKS`) spread over the NVSwitches of the host's sysfs
(NVIDIA functions of class 0680), as on an HGX board, and none active without switches; the GPU
fabric (Hopper and newer) is ``COMPLETED`` with an all-zero cluster UUID on such a board — one
node, no multi-node fabric — and not supported elsewhere, unless the host was put in a multi-node
fabric (:mod:`~pkg.backends.simulated.fabric`: the ``fabric_file``, read on every call). Minor
numbers come from the driver's ``proc/driver/nvidia/gpus/<address>/information`` in the host tree,
as the real library learns them from the driver, else from probe (PCI address) order. A card off
the bus answers ``GPU_IS_LOST`` to every query, and the driver version is the loaded driver's
(:mod:`~pkg.backends.simulated.host_changes`, both read on every call).
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

from pkg.backends.nvidia.mig import FIRST_DRIVER_WITH_PROFILES_WHILE_DISABLED
from pkg.backends.nvidia.nvml_port import (
    COMPUTE_MODE_DEFAULT,
    COMPUTE_MODE_EXCLUSIVE_PROCESS,
    GPU_FABRIC_STATE_COMPLETED,
    GPU_FABRIC_STATE_NOT_SUPPORTED,
    MIG_DISABLED,
    MIG_ENABLED,
    NO_INSTANCE,
    NVLINK_DEVICE_TYPE_SWITCH,
    ComputeInstanceInfo,
    GpuFabricInfo,
    GpuInstanceInfo,
    GpuInstanceProfileInfo,
    NvLink,
    NvmlError,
    NvmlReturn,
    ProcessInfo,
    ProcessUtilization,
    RemappedRows,
)
from pkg.backends.nvidia.profiles import ModelFacts
from pkg.backends.simulated.data import CUDA_DRIVER_VERSION, DRIVER_VERSION, SimulatedModel, models
from pkg.backends.simulated.driver_memory import (
    CardRecord,
    ComputeInstanceRecord,
    GpuInstanceRecord,
    SimulatedDriverMemory,
)
from pkg.backends.simulated.events import SimulatedEventSet
from pkg.backends.simulated.fabric import FabricFileError, health_mask, read_fabric
from pkg.backends.simulated.gpu_processes import GpuProcess, GpuProcessScan
from pkg.backends.simulated.host_changes import loaded_driver_version, lost_cards

_UUID_NAMESPACE: Final = uuid.UUID("6f1d2c3e-9b7a-4f0e-8c55-2d4b8e6a1f30")
_CLOCKS_EVENT_GPU_IDLE: Final = 0x1
_FIRST_ROW_REMAPPING_ARCH: Final = 7  # Ampere: row remapping replaces page retirement
_DRIVER_MAJOR = re.compile(r"^(\d+)\.")
_DEVICE_MINOR = re.compile(r"^Device Minor:\s*(\d+)\s*$", re.MULTILINE)
_WHOLE_COMPUTE_INSTANCE_PROFILE: Final = 0  # one profile per GPU instance in the simulation
_ARCH_HOPPER: Final = 9  # NVML_DEVICE_ARCH_HOPPER: the first with GPU fabric info
_NO_CLUSTER: Final = "00000000-0000-0000-0000-000000000000"
_IDLE_POWER_SHARE: Final = 0.25  # of the card's maximum power limit, drawn with no SM busy


class SimulatedNvml:
    """NVML for the simulated cards of one node. Thread-safe; the driver state is process-safe too."""

    def __init__(
        self,
        *,
        node_name: str,
        sysfs_root: Path,
        driver_version: str = DRIVER_VERSION,
        cuda_driver_version: int = CUDA_DRIVER_VERSION,
        mig_enabled: Iterable[str] = (),
        state: SimulatedDriverMemory | None = None,
        processes_proc: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        fabric_file: Path | None = None,
        lost_file: Path | None = None,
        driver_version_file: Path | None = None,
    ) -> None:
        """``processes_proc``: the ``/proc`` whose processes may use the simulated cards
        (:mod:`~pkg.backends.simulated.gpu_processes`); ``None``: only the test hook's processes.
        ``fabric_file``: the host's multi-node NVLink fabric (:mod:`~pkg.backends.simulated.fabric`).
        ``lost_file``, ``driver_version_file``: the cards off the bus and the loaded driver's version
        (:mod:`~pkg.backends.simulated.host_changes`)."""
        self._lost_file = lost_file
        self._driver_version_file = driver_version_file
        self._fabric_file = fabric_file
        self._node = node_name
        self._sysfs = sysfs_root
        self._driver = driver_version
        self._cuda = cuda_driver_version
        self.state = state or SimulatedDriverMemory(mig_enabled=mig_enabled)
        self._scan = GpuProcessScan(processes_proc) if processes_proc is not None else None
        self._clock = clock
        self._energy_lock = threading.Lock()
        self._energy: dict[str, tuple[float, float]] = {}  # address: (clock, millijoules)

    def driver_version(self) -> str:
        if self._driver_version_file is None:
            return self._driver
        return loaded_driver_version(self._driver_version_file, self._driver)

    def cuda_driver_version(self) -> int:
        return self._cuda

    def name(self, address: str) -> str:
        return self._model("nvmlDeviceGetName", address).product_name

    def uuid(self, address: str) -> str:
        self._model("nvmlDeviceGetUUID", address)
        return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{self._node}/{address}')}"

    def memory_total_bytes(self, address: str) -> int:
        return self._model("nvmlDeviceGetMemoryInfo", address).memory_mib * 1024 * 1024

    def cuda_compute_capability(self, address: str) -> tuple[int, int]:
        return self._model("nvmlDeviceGetCudaComputeCapability", address).compute_capability

    def architecture(self, address: str) -> int:
        return self._model("nvmlDeviceGetArchitecture", address).architecture

    def board_part_number(self, address: str) -> str:
        self._model("nvmlDeviceGetBoardPartNumber", address)
        raise _error("nvmlDeviceGetBoardPartNumber", address, NvmlReturn.NOT_SUPPORTED)

    def power_limit_constraints_mw(self, address: str) -> tuple[int, int]:
        low, high = self._power("nvmlDeviceGetPowerManagementLimitConstraints", address)
        return low * 1000, high * 1000

    def power_limit_mw(self, address: str) -> int:
        return self._power("nvmlDeviceGetPowerManagementLimit", address)[1] * 1000

    def enforced_power_limit_mw(self, address: str) -> int:
        return self._power("nvmlDeviceGetEnforcedPowerLimit", address)[1] * 1000

    def mig_mode(self, address: str) -> tuple[int, int]:
        self._mig("nvmlDeviceGetMigMode", address)
        mode = self.state.card(address).mig_mode
        return mode, mode

    def gpu_instance_profile_info(self, address: str, profile_index: int) -> GpuInstanceProfileInfo:
        call = "nvmlDeviceGetGpuInstanceProfileInfoV"
        profile = self._profiles(call, address).profile_by_index(profile_index)
        if profile is None:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return profile.info

    def gpu_instance_possible_placements(self, address: str, profile_id: int) -> list[tuple[int, int]]:
        call = "nvmlDeviceGetGpuInstancePossiblePlacements_v2"
        profile = self._profiles(call, address).profile_by_id(profile_id)
        if profile is None:
            raise _error(call, address, NvmlReturn.INVALID_ARGUMENT)
        return list(profile.placements)

    def retired_pages_pending(self, address: str) -> bool:
        call = "nvmlDeviceGetRetiredPagesPendingStatus"
        if self._model(call, address).architecture >= _FIRST_ROW_REMAPPING_ARCH:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return self.state.card(address).reset_pending

    def remapped_rows(self, address: str) -> RemappedRows:
        call = "nvmlDeviceGetRemappedRows"
        if self._model(call, address).architecture < _FIRST_ROW_REMAPPING_ARCH:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        pending = self.state.card(address).reset_pending
        return RemappedRows(correctable=0, uncorrectable=int(pending), pending=pending, failure=False)

    def clocks_event_reasons(self, address: str) -> int:
        self._model("nvmlDeviceGetCurrentClocksEventReasons", address)
        return _CLOCKS_EVENT_GPU_IDLE

    def active_nvlinks(self, address: str) -> list[NvLink]:
        call = "nvmlDeviceGetNvLinkState"
        model = self._model(call, address)
        if not model.nvlinks:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        switches = self._nvswitches()
        return [
            NvLink(
                link=link,
                remote_type=NVLINK_DEVICE_TYPE_SWITCH,
                remote_bus_id="0000" + switches[link % len(switches)].upper(),  # NVML's 8-digit domain
            )
            for link in range(model.nvlinks if switches else 0)
        ]

    def gpu_fabric_info(self, address: str) -> GpuFabricInfo:
        call = "nvmlDeviceGetGpuFabricInfoV"
        model = self._model(call, address)
        if model.architecture < _ARCH_HOPPER:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        if self._fabric_file is not None:
            try:
                joined = read_fabric(self._fabric_file).get(address)
            except FabricFileError as exc:
                raise NvmlError(
                    call=call, code=NvmlReturn.UNKNOWN, message=str(exc), address=address
                ) from exc
            if joined is not None:
                return joined.info()
        on_board = bool(model.nvlinks and self._nvswitches())
        state = GPU_FABRIC_STATE_COMPLETED if on_board else GPU_FABRIC_STATE_NOT_SUPPORTED
        health = 0 if state == GPU_FABRIC_STATE_NOT_SUPPORTED else health_mask(())
        return GpuFabricInfo(cluster_uuid=_NO_CLUSTER, clique_id=0, state=state, status=0, health_mask=health)

    # -- device preparation ----------------------------------------------------------------------

    def minor_number(self, address: str) -> int:
        self._model("nvmlDeviceGetMinorNumber", address)
        info = self._sysfs / "proc" / "driver" / "nvidia" / "gpus" / address / "information"
        try:
            match = _DEVICE_MINOR.search(info.read_text())
        except OSError:
            match = None
        if match is not None:
            return int(match.group(1))
        return self._probe_order().index(address)

    def running_processes(self, address: str) -> list[int]:
        return sorted({p.pid for p in self.processes(address)})

    def processes(self, address: str) -> list[ProcessInfo]:
        self._model("nvmlDeviceGetComputeRunningProcesses", address)
        card = self.state.card(address)
        found = {pid: ProcessInfo(pid=pid, used_memory_bytes=0) for pid in card.processes}
        migs = self._mig_uuids(address, card)
        for process in self._scanned(address, card, migs):
            gpu_instance, compute_instance = next(
                (pair for mig, pair in migs.items() if mig in process.visible), (NO_INSTANCE, NO_INSTANCE)
            )
            found[process.pid] = ProcessInfo(
                pid=process.pid,
                used_memory_bytes=process.memory_bytes,
                gpu_instance=gpu_instance,
                compute_instance=compute_instance,
            )
        return list(found.values())

    def process_utilization(self, address: str, since_us: int) -> list[ProcessUtilization]:
        call = "nvmlDeviceGetProcessUtilization"
        self._model(call, address)
        card = self.state.card(address)
        if card.mig_mode == MIG_ENABLED:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        now_us = int(time.time() * 1_000_000)
        if now_us <= since_us:
            return []
        return [
            ProcessUtilization(pid=p.pid, timestamp_us=now_us, sm_percent=p.sm_percent, memory_percent=0)
            for p in self._scanned(address, card)
        ]

    def total_energy_mj(self, address: str) -> int:
        """The card's energy counter, advanced at every read by the power its processes draw now:
        a quarter of the maximum limit idle, the whole of it with every SM busy."""
        call = "nvmlDeviceGetTotalEnergyConsumption"
        _low, high = self._power(call, address)
        busy = min(100, sum(p.sm_percent for p in self._scanned(address, self.state.card(address))))
        watts = high * (_IDLE_POWER_SHARE + (1 - _IDLE_POWER_SHARE) * busy / 100)
        with self._energy_lock:
            now = self._clock()
            then, energy = self._energy.get(address, (now, 0.0))
            energy += watts * (now - then) * 1000
            self._energy[address] = (now, energy)
            return int(energy)

    def set_mig_mode(self, address: str, mode: int) -> None:
        call = "nvmlDeviceSetMigMode"
        self._mig(call, address)
        if mode not in (MIG_DISABLED, MIG_ENABLED):
            raise _error(call, address, NvmlReturn.INVALID_ARGUMENT)

        def switch(card: CardRecord) -> None:
            if card.mig_mode == mode:
                return
            if card.processes or card.gpu_instances or busy:
                raise _error(call, address, NvmlReturn.IN_USE)
            card.mig_mode = mode

        busy = bool(self._scanned(address, self.state.card(address)))
        self.state.change(address, switch)

    def compute_mode(self, address: str) -> int:
        self._model("nvmlDeviceGetComputeMode", address)
        return self.state.card(address).compute_mode

    def set_compute_mode(self, address: str, mode: int) -> None:
        call = "nvmlDeviceSetComputeMode"
        self._model(call, address)
        if mode not in (COMPUTE_MODE_DEFAULT, COMPUTE_MODE_EXCLUSIVE_PROCESS):
            raise _error(call, address, NvmlReturn.INVALID_ARGUMENT)

        def change(card: CardRecord) -> None:
            card.compute_mode = mode

        self.state.change(address, change)

    def gpu_instances(self, address: str) -> list[GpuInstanceInfo]:
        self._enabled("nvmlDeviceGetGpuInstances", address)
        return [_gpu_instance(gi) for gi in self.state.card(address).gpu_instances]

    def create_gpu_instance(self, address: str, *, profile_id: int, start: int, size: int) -> GpuInstanceInfo:
        call = "nvmlDeviceCreateGpuInstanceWithPlacement"
        facts = self._mig(call, address)
        profile = facts.profile_by_id(profile_id)
        if profile is None or (start, size) not in profile.placements:
            raise _error(call, address, NvmlReturn.INVALID_ARGUMENT)

        def create(card: CardRecord) -> GpuInstanceInfo:
            if card.mig_mode != MIG_ENABLED:
                raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
            taken = {s for gi in card.gpu_instances for s in range(gi.start, gi.start + gi.size)}
            same_profile = sum(1 for gi in card.gpu_instances if gi.profile_id == profile_id)
            if taken & set(range(start, start + size)) or same_profile >= profile.info.instance_count:
                raise _error(call, address, NvmlReturn.INSUFFICIENT_RESOURCES)
            used = {gi.id for gi in card.gpu_instances}
            new = GpuInstanceRecord(
                id=min(i for i in range(1, len(used) + 2) if i not in used),
                profile_id=profile_id,
                start=start,
                size=size,
            )
            card.gpu_instances.append(new)
            return _gpu_instance(new)

        return self.state.change(address, create)

    def destroy_gpu_instance(self, address: str, gpu_instance: int) -> None:
        call = "nvmlGpuInstanceDestroy"
        self._model(call, address)

        def destroy(card: CardRecord) -> None:
            gi = card.gpu_instance(gpu_instance)
            if gi is None:
                raise _error(call, address, NvmlReturn.NOT_FOUND)
            if gi.compute_instances:
                raise _error(call, address, NvmlReturn.IN_USE)
            card.gpu_instances.remove(gi)

        self.state.change(address, destroy)

    def compute_instances(self, address: str, gpu_instance: int) -> list[ComputeInstanceInfo]:
        gi = self.state.card(address).gpu_instance(gpu_instance)
        if gi is None:
            raise _error("nvmlDeviceGetGpuInstanceById", address, NvmlReturn.NOT_FOUND)
        return [ComputeInstanceInfo(id=ci.id, profile_id=ci.profile_id) for ci in gi.compute_instances]

    def create_compute_instance(self, address: str, gpu_instance: int) -> ComputeInstanceInfo:
        call = "nvmlGpuInstanceCreateComputeInstance"
        self._model(call, address)

        def create(card: CardRecord) -> ComputeInstanceInfo:
            gi = card.gpu_instance(gpu_instance)
            if gi is None:
                raise _error("nvmlDeviceGetGpuInstanceById", address, NvmlReturn.NOT_FOUND)
            if gi.compute_instances:  # the whole-instance profile leaves no room for a second one
                raise _error(call, address, NvmlReturn.INSUFFICIENT_RESOURCES)
            ci = ComputeInstanceRecord(id=0, profile_id=_WHOLE_COMPUTE_INSTANCE_PROFILE)
            gi.compute_instances.append(ci)
            return ComputeInstanceInfo(id=ci.id, profile_id=ci.profile_id)

        return self.state.change(address, create)

    def destroy_compute_instance(self, address: str, gpu_instance: int, compute_instance: int) -> None:
        call = "nvmlComputeInstanceDestroy"
        self._model(call, address)

        def destroy(card: CardRecord) -> None:
            gi = card.gpu_instance(gpu_instance)
            ci = next((c for c in gi.compute_instances if c.id == compute_instance), None) if gi else None
            if gi is None or ci is None:
                raise _error(call, address, NvmlReturn.NOT_FOUND)
            gi.compute_instances.remove(ci)

        self.state.change(address, destroy)

    def mig_device_uuid(self, address: str, gpu_instance: int, compute_instance: int) -> str:
        call = "nvmlDeviceGetMigDeviceHandleByIndex"
        self._model(call, address)
        gi = self.state.card(address).gpu_instance(gpu_instance)
        if gi is None or all(ci.id != compute_instance for ci in gi.compute_instances):
            raise _error(call, address, NvmlReturn.NOT_FOUND)
        return (
            f"MIG-{uuid.uuid5(_UUID_NAMESPACE, f'{self._node}/{address}/{gpu_instance}/{compute_instance}')}"
        )

    # -- health events ---------------------------------------------------------------------------

    def open_events(self, addresses: Sequence[str], event_types: int) -> SimulatedEventSet:
        for address in addresses:
            self._model("nvmlDeviceRegisterEvents", address)
        return SimulatedEventSet(self.state, addresses, event_types)

    def close(self) -> None:
        """Nothing to release."""

    # -- internals -------------------------------------------------------------------------------

    def _model(self, call: str, address: str) -> SimulatedModel:
        if self._lost_file is not None and address in lost_cards(self._lost_file):
            raise _error(call, address, NvmlReturn.GPU_IS_LOST)  # off the bus: every query of it
        device = self._sysfs / "bus" / "pci" / "devices" / address
        try:
            vendor = (device / "vendor").read_text().strip().removeprefix("0x")
            device_id = (device / "device").read_text().strip().removeprefix("0x")
            driver = os.path.basename(os.readlink(device / "driver"))
        except OSError:
            raise _error(call, address, NvmlReturn.NOT_FOUND) from None
        model = models().get(device_id) if vendor == "10de" and driver == "nvidia" else None
        if model is None:
            raise _error(call, address, NvmlReturn.NOT_FOUND)
        return model

    def _power(self, call: str, address: str) -> tuple[int, int]:
        limits = self._model(call, address).power_limits_w
        if limits is None:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return limits

    def _mig(self, call: str, address: str) -> ModelFacts:
        facts = self._model(call, address).mig
        if facts is None:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return facts

    def _enabled(self, call: str, address: str) -> ModelFacts:
        facts = self._mig(call, address)
        if self.state.card(address).mig_mode != MIG_ENABLED:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return facts

    def _scanned(
        self, address: str, card: CardRecord, migs: dict[str, tuple[int, int]] | None = None
    ) -> list[GpuProcess]:
        """Real processes using the card (:mod:`~pkg.backends.simulated.gpu_processes`); ``migs``:
        its MIG devices, when the caller has them already."""
        if self._scan is None:
            return []
        if migs is None:
            migs = self._mig_uuids(address, card)
        uuids = frozenset({self.uuid(address), *migs})
        return self._scan.on_card(minor=self.minor_number(address), uuids=uuids)

    def _mig_uuids(self, address: str, card: CardRecord) -> dict[str, tuple[int, int]]:
        """The UUID of every MIG device of the card: (GPU instance, compute instance)."""
        return {
            self.mig_device_uuid(address, gi.id, ci.id): (gi.id, ci.id)
            for gi in card.gpu_instances
            for ci in gi.compute_instances
        }

    def _probe_order(self) -> list[str]:
        devices = self._sysfs / "bus" / "pci" / "devices"
        found = []
        for address in sorted(p.name for p in devices.iterdir()) if devices.is_dir() else []:
            try:
                self._model("probe", address)
            except NvmlError:
                continue
            found.append(address)
        return found

    def _nvswitches(self) -> list[str]:
        """The host's NVSwitches: NVIDIA functions of class 0680 ("other bridge"), by address."""
        devices = self._sysfs / "bus" / "pci" / "devices"
        found = []
        for address in sorted(p.name for p in devices.iterdir()) if devices.is_dir() else []:
            try:
                vendor = (devices / address / "vendor").read_text().strip()
                pci_class = (devices / address / "class").read_text().strip()
            except OSError:
                continue
            if vendor == "0x10de" and pci_class.startswith("0x0680"):
                found.append(address)
        return found

    def _profiles(self, call: str, address: str) -> ModelFacts:
        facts = self._mig(call, address)
        match = _DRIVER_MAJOR.match(self._driver)
        old_driver = match is not None and int(match.group(1)) < FIRST_DRIVER_WITH_PROFILES_WHILE_DISABLED
        if old_driver and self.state.card(address).mig_mode != MIG_ENABLED:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return facts


def _gpu_instance(gi: GpuInstanceRecord) -> GpuInstanceInfo:
    return GpuInstanceInfo(id=gi.id, profile_id=gi.profile_id, start=gi.start, size=gi.size)


def _error(call: str, address: str, code: NvmlReturn) -> NvmlError:
    return NvmlError(call=call, code=code, message=code.name.replace("_", " ").title(), address=address)
