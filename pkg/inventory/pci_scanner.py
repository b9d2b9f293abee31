"""The PCI scanner service: every PCI function of the host, and those present but unreadable.

:func:`pkg.hardware.pci.scan_pci` leaves an unreadable device out of its devices (with a warning
naming it). For the agent, "left out" would read as "removed" and delete the card's PhysicalGPU,
losing what other components wrote into it because of one failed read. So the scanner also reports
the addresses that are listed but were not read (``scan_pci``'s ``unread``); the cleanup step keeps
their objects until a later scan either reads the device or no longer lists it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pkg.hardware.pci import PciDevice, scan_pci


@dataclass(frozen=True)
class PciScan:
    devices: list[PciDevice]  # sorted by address
    unreadable: frozenset[str]  # addresses listed in sysfs whose attributes could not be read
    reasons: Mapping[str, str] = field(default_factory=dict)  # unreadable address -> why


class PciScanner(Protocol):
    def scan(self) -> PciScan:
        """Raises ``OSError`` when the devices directory itself cannot be read."""
        ...


class SysfsPciScanner:
    """Scans ``<sysfs_root>/bus/pci/devices``."""

    def __init__(self, sysfs_root: Path) -> None:
        self._root = sysfs_root

    @property
    def devices_dir(self) -> Path:
        return self._root / "bus" / "pci" / "devices"

    def scan(self) -> PciScan:
        result = scan_pci(self._root)
        return PciScan(devices=result.devices, unreadable=frozenset(result.unread), reasons=result.unread)
