"""Discovery: which GPUs the node has now, and what the host is.

A PCI function is a GPU when a vendor backend claims its vendor ID and its class is one of that
vendor's GPU classes (VGA ``0300`` or 3D controller ``0302``, plus any class the vendor's identity
adds for its compute cards). Everything else is ignored, including functions of a
GPU vendor that are not GPUs: the HDMI audio function (``0403``) of a card, an NVSwitch (``0680``),
a bridge. A scan that cannot read the devices directory raises, so an unreadable sysfs never reads
as "every card removed". A single card the API could not represent (an address outside the
schema's pattern, e.g. a VMD domain) is reported as a problem and kept out, and its address is
marked unreadable so no object of it is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api.gpu.v1alpha1 import DriverType, PciInfo
from pkg.backends import VendorIdentity, VendorRegistry, driver_type_for
from pkg.hardware.hostinfo import HostInfo
from pkg.hardware.pci import PciDevice
from pkg.inventory.desired import PciNames, device_label, pci_info
from pkg.inventory.host_info import HostInfoReader
from pkg.inventory.naming import address_key
from pkg.inventory.pci_scanner import PciScanner


@dataclass(frozen=True)
class DiscoveredGPU:
    """A card the scan found and a vendor backend claims, with everything the agent writes."""

    vendor: VendorIdentity
    pci_info: PciInfo
    driver_type: DriverType | None
    device_label: str

    @property
    def address(self) -> str:
        return self.pci_info.address

    @property
    def key(self) -> str:
        return address_key(self.pci_info.address)


@dataclass(frozen=True)
class Problem:
    """A card that was seen but could not be described: what it is, and why."""

    subject: str  # e.g. "PCI device 10000:01:00.0"
    error: Exception


@dataclass
class Discovery:
    """What one scan found, in scan order."""

    host: HostInfo
    known_vendors: frozenset[str]  # vendor label values of the loaded backends
    gpus: list[DiscoveredGPU] = field(default_factory=list)
    unreadable: set[str] = field(default_factory=set)  # address keys seen but not readable
    problems: list[Problem] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)  # PCI address seen but not read -> why


def gpu_vendor(device: PciDevice, vendors: VendorRegistry) -> VendorIdentity | None:
    """The backend's identity if ``device`` is a GPU one claims, else ``None``."""
    identity = vendors.by_pci_vendor(device.vendor_id)
    if identity is None or device.class_code not in identity.class_codes:
        return None
    return identity


class Discoverer:
    """Reads the host and scans its PCI functions; raises only when the scan itself fails."""

    def __init__(
        self, *, scanner: PciScanner, host_info: HostInfoReader, vendors: VendorRegistry, names: PciNames
    ) -> None:
        self._scanner = scanner
        self._host_info = host_info
        self._vendors = vendors
        self._names = names

    def discover(self) -> Discovery:
        found = Discovery(host=self._host_info.read(), known_vendors=frozenset(self._vendors.vendor_names()))
        scan = self._scanner.scan()
        found.unreadable.update(address_key(address) for address in scan.unreadable)
        found.unread.update((address, scan.reasons.get(address, "unreadable")) for address in scan.unreadable)
        for device in scan.devices:
            vendor = gpu_vendor(device, self._vendors)
            if vendor is not None:
                self._add(found, device, vendor)
        return found

    def _add(self, found: Discovery, device: PciDevice, vendor: VendorIdentity) -> None:
        try:
            info = pci_info(device, self._names)
        except ValueError as exc:
            found.unreadable.add(address_key(device.address))
            found.problems.append(Problem(subject=f"PCI device {device.address}", error=exc))
            return
        found.gpus.append(
            DiscoveredGPU(
                vendor=vendor,
                pci_info=info,
                driver_type=driver_type_for(vendor, device.driver),
                device_label=device_label(info),
            )
        )


__all__ = ["DiscoveredGPU", "Discoverer", "Discovery", "Problem", "gpu_vendor"]
