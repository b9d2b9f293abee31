"""What Prepare/Unprepare do to an AMD card: its compute partition mode, and what a container gets.

A container of an AMD card or partition needs two device nodes: ``/dev/kfd`` (the compute
interface every ROCm process opens; the node's base CDI spec gives it to every container, see
:meth:`~pkg.backends.amd.backend.AmdBackend.driver_files`) and the render node of what it was
given — the card's own ``renderD<N>`` when whole, the partition's when a partition (KFD topology,
:mod:`.sysfs`), which these edits add. Only that render node: ROCm enumerates the render nodes it
can open, so the container sees exactly its device.

The card-wide mode is this vendor's counterpart of MIG mode, and the port's MIG-mode questions
are answered in its terms: a card is "partitioned" while its mode is not the one-partition mode
(SPX), and leaving that state is switching back to SPX. Like enabling MIG, a switch happens only
on a free card; the driver refuses it while a process holds the card (``CardBusy``). There are no
per-instance devices to create: a partition exists as soon as the mode does. Time slicing and MPS
are NVIDIA's; asking for them here is ``NotSupported``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final, NoReturn

from api.gpu.v1alpha1 import TimeSlicingInterval
from pkg.backends.amd.driver import AmdDriver
from pkg.backends.amd.sysfs import read_card
from pkg.backends.preparation import (
    REASON_DEVICE_NODE,
    REASON_NOT_SUPPORTED,
    ContainerEdits,
    DeviceNode,
    MigDevice,
    MpsFolders,
    MpsLimits,
    PreparationError,
)

WHOLE_CARD_MODE: Final = "spx"


class AmdPreparer:
    """Partition modes and container edits of AMD cards; thread-safe (no state of its own)."""

    def __init__(self, *, sysfs_root: Path, dev_root: Path, driver: AmdDriver) -> None:
        self._sysfs_root = sysfs_root
        self._dev_root = dev_root
        self._driver = driver

    # The card-wide partition mode.

    def partition_mode(self, address: str) -> str | None:
        """The card's compute partition mode (``spx``, ``cpx``); ``None`` without partitioning."""
        return read_card(self._sysfs_root, address).compute_mode

    def set_partition_mode(self, address: str, mode: str | None) -> None:
        """Switches the card to ``mode`` (``None``: SPX); nothing happens when it is in it already."""
        current = self.partition_mode(address)
        wanted = mode or WHOLE_CARD_MODE
        if current is None:
            _unsupported(address, "compute partition modes")
        if current == wanted:
            return
        self._driver.switch_compute_partition(address, wanted)

    def partition_edits(self, address: str, mode: str, index: int) -> ContainerEdits:
        """What a container of partition ``index`` needs; the card must be in ``mode``."""
        card = read_card(self._sysfs_root, address)
        if card.compute_mode != mode or index >= len(card.render_minors):
            raise PreparationError(
                address=address,
                reason=REASON_DEVICE_NODE,
                message=f"partition {mode.upper()} {index} does not exist (the card is in "
                f"{(card.compute_mode or 'no mode').upper()} with {len(card.render_minors)} partitions)",
            )
        return self._edits(address, card.render_minors[index])

    # The port (pkg.backends.preparation.CardPreparer).

    def mig_enabled(self, address: str) -> bool:
        mode = self.partition_mode(address)
        return mode is not None and mode != WHOLE_CARD_MODE

    def set_mig_mode(self, address: str, *, enabled: bool) -> None:
        if enabled:
            _unsupported(address, "per-instance partitions (MIG)")
        if self.partition_mode(address) is not None:
            self.set_partition_mode(address, None)

    def processes(self, address: str) -> Sequence[int]:
        return self._driver.processes(address)

    def mig_devices(self, address: str) -> list[MigDevice]:
        return []

    def create_mig_device(self, address: str, *, profile_id: int, start: int, size: int) -> MigDevice:
        _unsupported(address, "MIG devices")

    def destroy_mig_device(self, address: str, *, start: int) -> bool:
        return False

    def card_edits(self, address: str) -> ContainerEdits:
        card = read_card(self._sysfs_root, address)
        if not card.render_minors:
            raise PreparationError(
                address=address,
                reason=REASON_DEVICE_NODE,
                message="the card has no render node (KFD topology)",
            )
        return self._edits(address, card.render_minors[0])

    def mig_edits(self, address: str, device: MigDevice) -> ContainerEdits:
        _unsupported(address, "MIG devices")

    def set_time_slice(self, address: str, interval: TimeSlicingInterval) -> None:
        _unsupported(address, "time-slice settings")

    def start_mps(self, address: str, folders: MpsFolders) -> bool:
        _unsupported(address, "MPS")

    def stop_mps(self, address: str, folders: MpsFolders) -> bool:
        return False

    def mps_running(self, folders: MpsFolders) -> bool:
        return False

    def mps_edits(self, address: str, folders: MpsFolders, limits: MpsLimits) -> ContainerEdits:
        _unsupported(address, "MPS")

    def _edits(self, address: str, minor: int) -> ContainerEdits:
        path = f"/dev/dri/renderD{minor}"
        host = self._dev_root / "dri" / f"renderD{minor}"
        if not host.exists():
            raise PreparationError(
                address=address, reason=REASON_DEVICE_NODE, message=f"{host} does not exist"
            )
        return ContainerEdits(device_nodes=(DeviceNode(path=path, host_path=str(host)),))


def _unsupported(address: str, what: str) -> NoReturn:
    raise PreparationError(address=address, reason=REASON_NOT_SUPPORTED, message=f"AMD cards have no {what}")
