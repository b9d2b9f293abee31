"""The one thing the AMD backend asks of the driver besides reading: switch a card's compute mode.

``amdgpu`` switches a card's compute partition mode when ``current_compute_partition`` is
written (``SPX``, ``DPX``, ``QPX``, ``CPX``); the write fails while a process holds the card,
and afterwards the partitions' KFD nodes and render nodes are new. :class:`SysfsDriver` is that
write; the simulation (:mod:`pkg.backends.amd.simulated`) does in a fixture tree what the driver
does, so the rest of the backend is the same code in tests and on a real node.

Which processes use a card is read from ``/proc/<pid>/fdinfo``: every open DRM file (a render
node, which every ROCm process opens) reports ``drm-pdev: <PCI address>``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol

from pkg.backends.amd.sysfs import card_folder
from pkg.backends.preparation import REASON_CARD_BUSY, REASON_DRIVER, PreparationError
from pkg.hardware.files import read_text

COMPUTE_PARTITION: Final = "current_compute_partition"


class AmdDriver(Protocol):
    def switch_compute_partition(self, address: str, mode: str) -> None:
        """Switches the card to ``mode`` (lower-case); :data:`REASON_CARD_BUSY` while in use."""
        ...

    def processes(self, address: str) -> Sequence[int]:
        """PIDs holding a DRM file of the card."""
        ...


class SysfsDriver:
    """The real driver: a write of the sysfs attribute, processes from procfs."""

    def __init__(self, *, sysfs_root: Path, proc_root: Path) -> None:
        self._sysfs_root = sysfs_root
        self._proc_root = proc_root

    def switch_compute_partition(self, address: str, mode: str) -> None:
        path = card_folder(self._sysfs_root, address) / COMPUTE_PARTITION
        try:
            path.write_text(mode.upper() + "\n", encoding="ascii")
        except OSError as exc:
            reason = REASON_CARD_BUSY if exc.errno in (errno.EBUSY, errno.EPERM) else REASON_DRIVER
            raise PreparationError(
                address=address, reason=reason, message=f"switching to {mode.upper()}: {exc}"
            ) from exc

    def processes(self, address: str) -> list[int]:
        return processes_of(self._proc_root, address)


def processes_of(proc_root: Path, address: str) -> list[int]:
    """PIDs with an open DRM file whose ``drm-pdev`` is ``address``; unreadable ones are skipped
    (a process that exited, or one of another user's that we may not read)."""
    found = []
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit():
            continue
        try:
            infos = list(os.scandir(Path(entry.path) / "fdinfo"))
        except OSError:
            continue
        for info in infos:
            try:
                text = read_text(Path(info.path))
            except (OSError, ValueError):
                continue
            if any(_pdev(line) == address for line in text.splitlines()):
                found.append(int(entry.name))
                break
    return sorted(found)


def _pdev(line: str) -> str | None:
    key, _, value = line.partition(":")
    return value.strip() if key.strip() == "drm-pdev" else None
