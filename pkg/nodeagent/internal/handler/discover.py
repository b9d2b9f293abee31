"""Step 1, discover: which GPUs the node has now, and what the host is.

A PCI function is a GPU when its class is VGA (``0300``) or 3D controller (``0302``) and a vendor
backend claims its vendor ID (spec §2.1 B). Everything else is ignored, including functions of a
GPU vendor that are not GPUs: the HDMI audio function (``0403``) of a card, an NVSwitch (``0680``),
a bridge. A scan that cannot read the devices directory raises and stops the chain, so an
unreadable sysfs never reads as "every card removed". A single card the API could not represent
(an address outside the schema's pattern, e.g. a VMD domain) is logged and kept out, and its
address is marked unreadable so no object of it is deleted.
"""

from __future__ import annotations

import logging

from pkg.backends import VendorIdentity, VendorRegistry, driver_type_for
from pkg.hardware.pci import PciDevice
from pkg.nodeagent import metrics
from pkg.nodeagent.internal.service import HostInfoReader, PciScanner
from pkg.nodeagent.internal.state import DiscoveredGPU, SyncState
from pkg.nodeagent.internal.state.desired import PciNames, device_label, pci_info
from pkg.nodeagent.internal.state.naming import address_key

logger = logging.getLogger(__name__)

GPU_CLASS_CODES = frozenset({"0300", "0302"})  # VGA compatible controller, 3D controller


def gpu_vendor(device: PciDevice, vendors: VendorRegistry) -> VendorIdentity | None:
    """The backend's identity if ``device`` is a GPU one claims, else ``None``."""
    if device.class_code not in GPU_CLASS_CODES:
        return None
    return vendors.by_pci_vendor(device.vendor_id)


class DiscoverHandler:
    name = "discover"

    def __init__(
        self, *, scanner: PciScanner, host_info: HostInfoReader, vendors: VendorRegistry, names: PciNames
    ) -> None:
        self._scanner = scanner
        self._host_info = host_info
        self._vendors = vendors
        self._names = names

    def handle(self, state: SyncState) -> None:
        state.host = self._host_info.read()
        state.known_vendors = frozenset(self._vendors.vendor_names())
        scan = self._scanner.scan()
        state.unreadable.update(address_key(address) for address in scan.unreadable)
        for device in scan.devices:
            vendor = gpu_vendor(device, self._vendors)
            if vendor is not None:
                self._add(state, device, vendor)
        metrics.devices.labels(node=state.node_name).set(len(state.gpus))
        logger.debug(
            "discovered GPUs",
            extra={"node": state.node_name, "gpus": [gpu.address for gpu in state.gpus]},
        )

    def _add(self, state: SyncState, device: PciDevice, vendor: VendorIdentity) -> None:
        try:
            info = pci_info(device, self._names)
        except ValueError as exc:
            state.unreadable.add(address_key(device.address))
            state.fail(self.name, f"PCI device {device.address}", exc)
            return
        state.gpus.append(
            DiscoveredGPU(
                vendor=vendor,
                pci_info=info,
                driver_type=driver_type_for(vendor, device.driver),
                device_label=device_label(info),
            )
        )
