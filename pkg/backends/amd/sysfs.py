"""Reading one AMD card from sysfs: the ``amdgpu`` attributes of its PCI device and the KFD topology.

The driver publishes each card's facts as attributes of its PCI device
(``<sysfs>/bus/pci/devices/<address>/``): ``mem_info_vram_total`` (bytes), ``unique_id``,
``current_compute_partition`` and ``available_compute_partition`` (``SPX``; ``SPX, DPX, QPX,
CPX``), ``current_memory_partition`` and ``available_memory_partition`` (``NPS1``), and one
``ras/<block>_err_count`` per hardware block (``ue: 0`` / ``ce: 0`` lines). What it does not put
there is where each compute partition is: partitions past the first get render nodes of their
own (platform devices ``amdgpu_xcp_<n>``, with no link back to the card). The KFD topology does
link them: each partition is a node (``class/kfd/kfd/topology/nodes/<n>/properties``) whose
``domain`` and ``location_id`` are the card's PCI address and whose ``drm_render_minor`` is its
render node; the partitions of a card, in node order, are partitions 0, 1, ... of its mode.

Every read is bounded (:func:`~pkg.hardware.files.read_text`); a missing optional file is
``None``, an unreadable required one is :class:`~pkg.backends.backend.BackendError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.backends.errors import BackendError
from pkg.hardware.files import read_text

KFD_NODES: Final = "class/kfd/kfd/topology/nodes"
_COUNT_LINE: Final = re.compile(r"^(ue|ce|de):\s*(\d+)\s*$")
_ADDRESS: Final = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")


@dataclass(frozen=True)
class RasCounts:
    """Error counts of one RAS block: uncorrectable and correctable."""

    block: str
    uncorrectable: int
    correctable: int


@dataclass(frozen=True, kw_only=True)
class CardFiles:
    """What sysfs says about one card now; ``None`` where the driver has no such file."""

    address: str
    device_id: str
    vram_bytes: int | None
    unique_id: str | None
    compute_mode: str | None
    compute_modes: tuple[str, ...]
    memory_mode: str | None
    memory_modes: tuple[str, ...]
    ras: tuple[RasCounts, ...]
    render_minors: tuple[int, ...]  # one per compute partition, partition 0 first
    driver_version: str | None


def card_folder(sysfs_root: Path, address: str) -> Path:
    return sysfs_root / "bus" / "pci" / "devices" / address


def location_id(address: str) -> tuple[int, int]:
    """The KFD ``(domain, location_id)`` of a PCI address: ``(bus << 8) | (device << 3) | function``."""
    match = _ADDRESS.match(address)
    if match is None:
        raise ValueError(f"{address!r} is not a PCI address")
    domain, bus, device, function = (int(g, 16) for g in match.groups())
    return domain, (bus << 8) | (device << 3) | function


def read_card(sysfs_root: Path, address: str) -> CardFiles:
    """Reads the card at ``address``; :class:`BackendError` when its folder is not there."""
    folder = card_folder(sysfs_root, address)
    if not folder.is_dir():
        raise BackendError(address=address, reason="CardNotFound", message=f"{folder} does not exist")
    try:
        return _read(sysfs_root, folder, address)
    except (OSError, ValueError) as exc:
        raise BackendError(address=address, reason="UnreadableAttribute", message=str(exc)) from exc


def _read(sysfs_root: Path, folder: Path, address: str) -> CardFiles:
    device_id = _optional(folder / "device") or ""
    return CardFiles(
        address=address,
        device_id=device_id.lower().removeprefix("0x"),
        vram_bytes=_int(folder / "mem_info_vram_total", address),
        unique_id=_optional(folder / "unique_id"),
        compute_mode=_mode(_optional(folder / "current_compute_partition")),
        compute_modes=_modes(_optional(folder / "available_compute_partition")),
        memory_mode=_mode(_optional(folder / "current_memory_partition")),
        memory_modes=_modes(_optional(folder / "available_memory_partition")),
        ras=read_ras(folder),
        render_minors=partition_render_minors(sysfs_root, address),
        driver_version=_optional(sysfs_root / "module" / "amdgpu" / "version"),
    )


def read_ras(folder: Path) -> tuple[RasCounts, ...]:
    """Every ``ras/<block>_err_count`` of the card, by block name; empty without RAS."""
    ras = folder / "ras"
    if not ras.is_dir():
        return ()
    counts = []
    for path in sorted(ras.glob("*_err_count")):
        values = dict.fromkeys(("ue", "ce"), 0)
        for line in (_optional(path) or "").splitlines():
            if match := _COUNT_LINE.match(line.strip()):
                values[match.group(1)] = int(match.group(2))
        block = path.name.removesuffix("_err_count")
        counts.append(RasCounts(block=block, uncorrectable=values["ue"], correctable=values["ce"]))
    return tuple(counts)


def partition_render_minors(sysfs_root: Path, address: str) -> tuple[int, ...]:
    """The render minors of the card's KFD nodes (its compute partitions) in node order."""
    nodes = sysfs_root / KFD_NODES
    if not nodes.is_dir():
        return ()
    wanted = location_id(address)
    found: list[tuple[int, int]] = []
    for node in nodes.iterdir():
        if not node.name.isdigit():
            continue
        props = read_properties(node / "properties")
        minor = props.get("drm_render_minor", 0)
        if minor > 0 and (props.get("domain", 0), props.get("location_id", -1)) == wanted:
            found.append((int(node.name), minor))
    return tuple(minor for _, minor in sorted(found))


def read_properties(path: Path) -> dict[str, int]:
    """A KFD ``properties`` file: ``name value`` lines of integers; others are skipped."""
    props: dict[str, int] = {}
    for line in (_optional(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            props[name] = int(value)
    return props


def _optional(path: Path) -> str | None:
    """The stripped content, ``None`` when the driver has no such file; other failures raise."""
    try:
        return read_text(path).strip()
    except FileNotFoundError:
        return None


def _int(path: Path, address: str) -> int | None:
    text = _optional(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise BackendError(
            address=address, reason="UnreadableAttribute", message=f"{path.name} is {text[:40]!r}"
        ) from None


def _mode(text: str | None) -> str | None:
    return text.strip().lower() or None if text else None


def _modes(text: str | None) -> tuple[str, ...]:
    return tuple(m.strip().lower() for m in (text or "").split(",") if m.strip())
