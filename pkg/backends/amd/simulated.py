"""A simulated ``amdgpu`` that acts on a fixture host tree the way the driver acts on sysfs.

The AMD backend reads only files, so a fixture tree (test/fixtures/sysfs/mi300x-x8, mi210) is a
complete card to it; what files cannot do by themselves is what the driver does when the compute
mode is switched. :class:`SimulatedAmdgpu` does that to the tree: it refuses a mode the card does
not list in ``available_compute_partition`` (``NotSupported``) and any switch while a process holds
the card (``CardBusy``), then writes the new mode and replaces the card's KFD topology nodes with
one per partition. Partition 0 keeps the card's own render node; the others get render minors
no other node uses, as the driver's ``amdgpu_xcp`` devices do, and device files for them appear
under the simulated ``/dev`` when one is given.

Which processes hold a card is the simulation's state: ``<state_dir>/amd-processes/<address>``
lists PIDs, one a line (tests write it to make a card busy).

:func:`write_partitions` is also what the fixture builder uses to lay out a card's nodes, so the
trees and the simulation cannot disagree about the layout.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pkg.backends.amd.driver import COMPUTE_PARTITION
from pkg.backends.amd.models import model_of
from pkg.backends.amd.sysfs import KFD_NODES, card_folder, location_id, read_card, read_properties
from pkg.backends.preparation import REASON_CARD_BUSY, REASON_NOT_SUPPORTED, PreparationError

PROCESSES_DIR: Final = "amd-processes"
FIRST_PARTITION_MINOR: Final = 192  # above the primary render nodes (128 + card index)


class SimulatedAmdgpu:
    """The partition switch of ``amdgpu`` over the tree at ``sysfs_root``."""

    def __init__(
        self, *, sysfs_root: Path, dev_root: Path | None = None, state_dir: Path | None = None
    ) -> None:
        self._sysfs_root = sysfs_root
        self._dev_root = dev_root
        self._state_dir = state_dir

    def processes(self, address: str) -> list[int]:
        if self._state_dir is None:
            return []
        path = self._state_dir / PROCESSES_DIR / address
        if not path.is_file():
            return []
        return [int(line) for line in path.read_text(encoding="ascii").split() if line.isdigit()]

    def switch_compute_partition(self, address: str, mode: str) -> None:
        card = read_card(self._sysfs_root, address)
        if mode not in card.compute_modes:
            raise PreparationError(
                address=address,
                reason=REASON_NOT_SUPPORTED,
                message=f"{mode.upper()} is not among {', '.join(card.compute_modes).upper()}",
            )
        if pids := self.processes(address):
            raise PreparationError(
                address=address,
                reason=REASON_CARD_BUSY,
                message=f"cannot switch to {mode.upper()}: processes {pids} hold the card (EBUSY)",
            )
        model = model_of(card.device_id)
        count = model.compute_modes.get(mode, 1) if model else 1
        minors = write_partitions(
            self._sysfs_root, address, count=count, primary_minor=primary_minor(self._sysfs_root, address)
        )
        (card_folder(self._sysfs_root, address) / COMPUTE_PARTITION).write_text(
            mode.upper() + "\n", encoding="ascii"
        )
        if self._dev_root is not None:
            make_device_files(self._dev_root, minors)


def primary_minor(sysfs_root: Path, address: str) -> int:
    """The card's own render minor, from its ``drm/renderD<N>`` folder."""
    for entry in sorted((card_folder(sysfs_root, address) / "drm").glob("renderD*")):
        return int(entry.name.removeprefix("renderD"))
    raise FileNotFoundError(f"{address}: no drm/renderD* folder")


def write_partitions(sysfs_root: Path, address: str, *, count: int, primary_minor: int) -> list[int]:
    """Replaces the card's KFD nodes with ``count`` partitions; returns their render minors."""
    nodes = sysfs_root / KFD_NODES
    nodes.mkdir(parents=True, exist_ok=True)
    domain, location = location_id(address)
    taken: set[int] = set()
    for node in list(nodes.iterdir()):
        props = read_properties(node / "properties")
        if (props.get("domain", 0), props.get("location_id", -1)) == (domain, location):
            shutil.rmtree(node)
        else:
            taken.add(props.get("drm_render_minor", 0))
    minors = [primary_minor, *_free(taken | {primary_minor}, count - 1)]
    numbers = [int(n.name) for n in nodes.iterdir() if n.name.isdigit()]
    first = max(numbers, default=-1) + 1
    for offset, minor in enumerate(minors):
        folder = nodes / str(first + offset)
        folder.mkdir()
        (folder / "properties").write_text(
            f"domain {domain}\nlocation_id {location}\ndrm_render_minor {minor}\n", encoding="ascii"
        )
    return minors


def make_device_files(dev_root: Path, minors: Iterable[int]) -> None:
    """Stand-ins for ``/dev/kfd`` and the render nodes: character devices with ``/dev/null``'s
    numbers, because a container runtime applying a CDI spec accepts only device nodes (an empty
    file where mknod is not allowed, which is enough for code that only checks the path)."""
    (dev_root / "dri").mkdir(parents=True, exist_ok=True)
    for path in (dev_root / "kfd", *(dev_root / "dri" / f"renderD{m}" for m in minors)):
        if path.exists():
            continue
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            path.touch()


def _free(taken: set[int], n: int) -> list[int]:
    free: list[int] = []
    minor = FIRST_PARTITION_MINOR
    while len(free) < n:
        if minor not in taken:
            free.append(minor)
        minor += 1
    return free
