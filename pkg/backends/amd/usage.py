"""The processes on an AMD card, from the KFD's per-process files (:class:`~pkg.backends.usage.CardUsage`).

The ``amdgpu`` driver's compute interface lists each process that opened ``/dev/kfd`` under
``<sysfs>/class/kfd/kfd/proc/<pid>/``, with ``vram_<gpu_id>``: the VRAM (bytes) the process holds on
the KFD node whose ``gpu_id`` file names that number. A card's nodes are its compute partitions
(KFD topology, :mod:`.sysfs`), so a process's memory on the card is the sum over them. The KFD
gives no per-process compute share and no energy counter in these files: those are ``None``.
Processes are reported with the card's UUID (its ``unique_id``, as the PhysicalGPU reports it);
a partition's Pod is found through its own claim on the card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pkg.backends.amd.sysfs import KFD_NODES, location_id, read_properties
from pkg.backends.errors import BackendError
from pkg.backends.usage import CardUsage, ProcessUsage
from pkg.hardware.files import read_text

KFD_PROCESSES: Final = "class/kfd/kfd/proc"


def read_usage(sysfs_root: Path, address: str, uuid: str | None) -> CardUsage:
    """Raises :class:`BackendError` when the card has no UUID to report its processes under."""
    if uuid is None:
        raise BackendError(address=address, reason="NoUniqueId", message="the card has no unique_id")
    gpu_ids = _gpu_ids(sysfs_root, address)
    processes = []
    folder = sysfs_root / KFD_PROCESSES
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        if not entry.name.isdigit():
            continue
        held = [_number(entry / f"vram_{gpu_id}") for gpu_id in gpu_ids]
        known = [value for value in held if value is not None]
        if known:
            processes.append(
                ProcessUsage(pid=int(entry.name), device_uuid=uuid, memory_bytes=sum(known), sm_percent=None)
            )
    return CardUsage(address=address, uuid=uuid, energy_mj=None, processes=tuple(processes))


def _gpu_ids(sysfs_root: Path, address: str) -> list[int]:
    """The ``gpu_id`` of each KFD node of the card (one per compute partition)."""
    nodes = sysfs_root / KFD_NODES
    wanted = location_id(address)
    found = []
    for node in sorted(nodes.iterdir()) if nodes.is_dir() else ():
        props = read_properties(node / "properties")
        if (props.get("domain", 0), props.get("location_id", -1)) != wanted:
            continue
        gpu_id = _number(node / "gpu_id")
        if gpu_id:
            found.append(gpu_id)
    return found


def _number(path: Path) -> int | None:
    try:
        text = read_text(path)
    except (OSError, ValueError):
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None
