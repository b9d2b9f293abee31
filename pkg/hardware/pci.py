"""PCI functions as the kernel shows them in sysfs: where the node agent finds GPUs and their ``pciInfo``.

The node agent's inventory is level-based: each sync scans ``<sysfs>/bus/pci/devices`` afresh and
compares with the PhysicalGPUs it owns, deleting those whose card is gone. Two rules follow from
that, and every function here keeps them:

- *One bad device never hides the others.* A device whose files cannot be read or parsed is left
  out with a warning naming it; a device that disappears while being read (hot unplug races the
  scan) is left out quietly, because it is gone and the next scan says so.
- *An empty answer means "nothing there", never "could not look".* When the devices directory
  itself cannot be listed, :func:`scan_pci` raises :class:`OSError` instead of returning
  ``[]``, which the agent would take as every card removed.

IDs are normalised once here (lower-case hex, no ``0x``) so that callers compare strings safely.
They are parsed strictly, as the kernel writes them (``0x10de``, ``-1``): Python's ``int()`` would
also take ``0x10_de``, ``+7``, `` 7`` or non-ASCII digits, none of which the kernel writes, so
such a file is a broken file, not a value. Every attribute is read through
:mod:`pkg.hardware.files`: a FIFO, a device or an oversized file in place of an attribute makes
its device unreadable instead of hanging the scan or exhausting memory.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pkg.hardware.files import read_text

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
# Domains are 4 hex digits, except behind Intel VMD, which adds domains such as 10000.
_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_HEX = re.compile(r"(?:0x)?([0-9a-fA-F]{1,8})", re.ASCII)
_DECIMAL = re.compile(r"-?[0-9]{1,10}", re.ASCII)


@dataclass(frozen=True)
class PciDevice:
    """One PCI function; optional attributes are ``None`` when the kernel does not expose them."""

    address: str  # "0000:02:00.0" (lower-case)
    vendor_id: str  # "10de" (4 lower-case hex, no 0x)
    device_id: str  # "20b7"
    class_code: str  # "0302": base class + subclass, from sysfs `class` 0x030200
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    driver: str | None  # basename of the `driver` symlink, e.g. "nvidia", "vfio-pci"; None when unbound
    numa_node: int | None  # None when the file is missing or says -1
    iommu_group: str | None  # basename of the `iommu_group` symlink; None without an IOMMU
    sriov_totalvfs: int | None  # None when the function has no SR-IOV capability
    sriov_numvfs: int | None = None  # VFs enabled right now; None without SR-IOV


@dataclass(frozen=True)
class PciScanResult:
    """What one scan found: the devices read, and why every other listed entry was not."""

    devices: list[PciDevice]  # sorted by address
    unread: dict[str, str] = field(default_factory=dict)  # listed entry -> why it was not read


def scan_pci(sysfs_root: Path) -> PciScanResult:
    """Every PCI function under ``<sysfs_root>/bus/pci/devices``, read or with the reason it was not.

    Raises :class:`OSError` when the directory itself cannot be listed (see the module docstring).
    """
    devices_dir = sysfs_root / "bus" / "pci" / "devices"
    result = PciScanResult(devices=[])
    for name in sorted(entry.name.lower() for entry in os.scandir(devices_dir)):
        device = _read_or_reason(sysfs_root, name)
        if isinstance(device, PciDevice):
            result.devices.append(device)
        else:
            result.unread[name] = device
    return result


def read_pci_device(sysfs_root: Path, address: str) -> PciDevice | None:
    """The function at ``address``, or ``None`` when it is absent, vanished or unreadable."""
    device = _read_or_reason(sysfs_root, address)
    return device if isinstance(device, PciDevice) else None


def _read_or_reason(sysfs_root: Path, address: str) -> PciDevice | str:
    address = address.lower()
    if not _ADDRESS.fullmatch(address):
        logger.warning("skipping PCI entry %r: not a PCI address", address, extra={"pci_address": address})
        return "not a PCI address"
    path = sysfs_root / "bus" / "pci" / "devices" / address
    try:
        return _read(path, address)
    except (OSError, ValueError) as err:
        if not path.exists():
            logger.debug("PCI device %s vanished while being read", address, extra={"pci_address": address})
            return "vanished while being read"
        logger.warning(
            "skipping unreadable PCI device %s: %s",
            address,
            err,
            extra={"pci_address": address, "path": str(path), "error": str(err)},
        )
        return str(err)


def iommu_group_members(sysfs_root: Path, group: str) -> list[str]:
    """Addresses of the functions in IOMMU group ``group``, sorted.

    A group always holds at least the device it was found through, so a missing group raises
    :class:`OSError` rather than returning ``[]``, which a caller checking "every member is bound
    to vfio-pci" would wrongly take as satisfied.
    """
    if not (group.isascii() and group.isdigit()):
        raise ValueError(f"IOMMU group must be a decimal number, got {group!r}")
    devices_dir = sysfs_root / "kernel" / "iommu_groups" / group / "devices"
    return sorted(entry.name.lower() for entry in os.scandir(devices_dir))


def read_numa_node(sysfs_root: Path, address: str) -> int | None:
    """The NUMA node of the function at ``address``; ``None`` when the file is missing or says -1
    (no affinity). Raises :class:`OSError` or :class:`ValueError` for a file that is there but
    cannot be read as the kernel writes it."""
    return _numa_node(sysfs_root / "bus" / "pci" / "devices" / address / "numa_node")


def _read(path: Path, address: str) -> PciDevice:
    class_value = _hex(path / "class")
    if not 0 <= class_value <= 0xFFFFFF:
        raise ValueError(f"class {class_value:#x} is not a 24-bit PCI class")
    device = PciDevice(
        address=address,
        vendor_id=_hex_id(path / "vendor"),
        device_id=_hex_id(path / "device"),
        class_code=f"{class_value:06x}"[:4],
        subsystem_vendor_id=_optional(path / "subsystem_vendor", _hex_id),
        subsystem_device_id=_optional(path / "subsystem_device", _hex_id),
        driver=_optional(path / "driver", _link_name),
        numa_node=_numa_node(path / "numa_node"),
        iommu_group=_optional(path / "iommu_group", _link_name),
        sriov_totalvfs=_optional(path / "sriov_totalvfs", _count),
        sriov_numvfs=_optional(path / "sriov_numvfs", _count),
    )
    # Optional attributes read as absent once the device is gone; don't report such a torso.
    if not path.is_dir():
        raise FileNotFoundError(f"{path} vanished")
    return device


def _text(path: Path) -> str:
    return read_text(path).strip(" \t\n\r\f\v")  # ASCII whitespace only, around what the kernel wrote


def _hex(path: Path) -> int:
    text = _text(path)
    match = _HEX.fullmatch(text)
    if match is None:
        raise ValueError(f"{path.name} {text[:40]!r} is not a hexadecimal number as the kernel writes it")
    return int(match.group(1), 16)


def _integer(path: Path) -> int:
    text = _text(path)
    if _DECIMAL.fullmatch(text) is None:
        raise ValueError(f"{path.name} {text[:40]!r} is not a decimal number as the kernel writes it")
    return int(text)


def _count(path: Path) -> int:
    value = _integer(path)
    if value < 0:
        raise ValueError(f"{path.name} {value} is negative")
    return value


def _hex_id(path: Path) -> str:
    value = _hex(path)
    if not 0 <= value <= 0xFFFF:
        raise ValueError(f"{path.name} {value:#x} is not a 16-bit PCI ID")
    return f"{value:04x}"


def _link_name(path: Path) -> str:
    return os.path.basename(os.readlink(path))


def _numa_node(path: Path) -> int | None:
    node = _optional(path, _integer)
    return node if node is not None and node >= 0 else None


def _optional(path: Path, read: Callable[[Path], _T]) -> _T | None:
    """``read(path)``, or ``None`` when the attribute does not exist (other errors propagate)."""
    try:
        return read(path)
    except FileNotFoundError:
        return None
