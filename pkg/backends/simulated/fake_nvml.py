"""A simulated NVML: the :class:`~pkg.backends.nvidia.nvml_port.Nvml` port answered from the data of
real cards, so the real NVIDIA backend runs unchanged in tests and the demo (DESIGN §8).

Which card sits at an address is read from sysfs, as the node agent reads it: the function's
``vendor`` and ``device`` files under ``<sysfs-root>/bus/pci/devices/<address>``. Like the real
library, the simulation sees only cards bound to the ``nvidia`` driver: an unbound card, one on
``vfio-pci`` or one of a model it does not know answers ``NOT_FOUND``.

Behaviour that mirrors NVML: memory in bytes, power in milliwatts, MIG mode Disabled unless the
address is in ``mig_enabled``, ``NOT_SUPPORTED`` for queries a model does not offer (MIG on an
L4, retired pages on Ampere and newer, which remap rows instead), and profile queries answered
with MIG disabled only from driver R550 on. UUIDs are derived from node name and address, so
they are stable across restarts and differ between nodes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pkg.backends.nvidia.mig import FIRST_DRIVER_WITH_PROFILES_WHILE_DISABLED
from pkg.backends.nvidia.nvml_port import (
    MIG_DISABLED,
    MIG_ENABLED,
    GpuInstanceProfileInfo,
    NvmlError,
    NvmlReturn,
    RemappedRows,
)
from pkg.backends.nvidia.profiles import ModelFacts
from pkg.backends.simulated.data import CUDA_DRIVER_VERSION, DRIVER_VERSION, SimulatedModel, models

_UUID_NAMESPACE: Final = uuid.UUID("6f1d2c3e-9b7a-4f0e-8c55-2d4b8e6a1f30")
_CLOCKS_EVENT_GPU_IDLE: Final = 0x1
_FIRST_ROW_REMAPPING_ARCH: Final = 7  # Ampere: row remapping replaces page retirement
_DRIVER_MAJOR = re.compile(r"^(\d+)\.")


class SimulatedNvml:
    """NVML for the simulated cards of one node. Stateless apart from its settings: thread-safe."""

    def __init__(
        self,
        *,
        node_name: str,
        sysfs_root: Path,
        driver_version: str = DRIVER_VERSION,
        cuda_driver_version: int = CUDA_DRIVER_VERSION,
        mig_enabled: Iterable[str] = (),
    ) -> None:
        self._node = node_name
        self._sysfs = sysfs_root
        self._driver = driver_version
        self._cuda = cuda_driver_version
        self._mig_enabled = frozenset(mig_enabled)

    def driver_version(self) -> str:
        return self._driver

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
        mode = MIG_ENABLED if address in self._mig_enabled else MIG_DISABLED
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
        return False

    def remapped_rows(self, address: str) -> RemappedRows:
        call = "nvmlDeviceGetRemappedRows"
        if self._model(call, address).architecture < _FIRST_ROW_REMAPPING_ARCH:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return RemappedRows(correctable=0, uncorrectable=0, pending=False, failure=False)

    def clocks_event_reasons(self, address: str) -> int:
        self._model("nvmlDeviceGetCurrentClocksEventReasons", address)
        return _CLOCKS_EVENT_GPU_IDLE

    def close(self) -> None:
        """Nothing to release."""

    # -- internals -------------------------------------------------------------------------------

    def _model(self, call: str, address: str) -> SimulatedModel:
        device = self._sysfs / "bus" / "pci" / "devices" / address
        try:
            vendor = (device / "vendor").read_text().strip().removeprefix("0x")
            device_id = (device / "device").read_text().strip().removeprefix("0x")
            driver = (device / "driver").resolve(strict=True).name
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

    def _profiles(self, call: str, address: str) -> ModelFacts:
        facts = self._mig(call, address)
        match = _DRIVER_MAJOR.match(self._driver)
        old_driver = match is not None and int(match.group(1)) < FIRST_DRIVER_WITH_PROFILES_WHILE_DISABLED
        if old_driver and address not in self._mig_enabled:
            raise _error(call, address, NvmlReturn.NOT_SUPPORTED)
        return facts


def _error(call: str, address: str, code: NvmlReturn) -> NvmlError:
    return NvmlError(call=call, code=code, message=code.name.replace("_", " ").title(), address=address)
