"""The kernel's side of driver binding on a simulated host: what a write to sysfs would do.

A fixture sysfs tree (``test/fixtures/sysfs``) holds the attribute files — ``driver_override`` per
function, ``bind`` and ``unbind`` per driver — so the real writes of
:class:`~pkg.hardware.pci_binding.PciDriverBinding` land somewhere; :class:`SimulatedPciKernel`
then changes the tree as the kernel would have inside the write:

* ``bus/pci/drivers/<driver>/unbind`` ← address: the function's ``driver`` link and the driver's
  link back to it go; the last function of an IOMMU group leaving ``vfio-pci`` removes
  ``<dev>/vfio/<group>``;
* ``bus/pci/drivers/<driver>/bind`` ← address: refused like the kernel refuses it — ``ENODEV`` for
  a function that does not exist or whose ``driver_override`` names another driver, ``EBUSY`` for
  one still bound, ``EINVAL`` for ``vfio-pci`` without an IOMMU group — otherwise both links are
  made, and ``vfio-pci`` makes ``<dev>/vfio/<group>`` and ``<dev>/vfio/vfio`` with mknod
  (character devices with /dev/null's numbers, like every simulated device node);
* ``driver_override``: the kernel only stores it, which the write already did.

Writes to mediated-device files (``mdev_supported_types/<type>/create``, ``<mdev>/remove``) are
passed to :class:`~pkg.backends.simulated.mdev_kernel.SimulatedMdevKernel`.

The simulated NVML reads the same links (it answers only for functions bound to ``nvidia``), so a
card handed to ``vfio-pci`` disappears from it exactly as from the real library.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from pkg.backends.simulated.device_nodes import make_device_node
from pkg.backends.simulated.mdev_kernel import SimulatedMdevKernel
from pkg.hardware.pci_binding import VFIO_PCI


class SimulatedPciKernel:
    def __init__(self, *, sysfs_root: Path, dev_root: Path) -> None:
        self._root = sysfs_root
        self._dev = dev_root
        self._mdev = SimulatedMdevKernel(sysfs_root=sysfs_root, dev_root=dev_root)

    def written(self, path: Path, value: str) -> None:
        self._mdev.written(path, value)
        parts = Path(os.path.relpath(os.path.realpath(path), os.path.realpath(self._root))).parts
        if len(parts) == 5 and parts[:3] == ("bus", "pci", "drivers") and parts[4] in ("bind", "unbind"):
            address = value.strip()
            if parts[4] == "bind":
                self._bind(address, parts[3], path)
            else:
                self._unbind(address, parts[3], path)

    def _function(self, address: str) -> Path:
        return self._root / "bus" / "pci" / "devices" / address

    def _bind(self, address: str, driver: str, path: Path) -> None:
        device = self._function(address)
        if not device.is_dir():
            raise OSError(errno.ENODEV, f"no PCI function {address}", str(path))
        if (device / "driver").is_symlink():
            raise OSError(errno.EBUSY, f"{address} is bound to a driver", str(path))
        override = _read(device / "driver_override")
        if override not in ("", "(null)", driver):
            raise OSError(errno.ENODEV, f"{address} may only be bound to {override}", str(path))
        group = _group(device)
        if driver == VFIO_PCI and group is None:
            raise OSError(errno.EINVAL, f"{address} has no IOMMU group", str(path))
        real = Path(os.path.realpath(device))
        drivers = self._root / "bus" / "pci" / "drivers" / driver
        os.symlink(os.path.relpath(drivers, real), real / "driver")
        os.symlink(os.path.relpath(real, drivers), drivers / address)
        if driver == VFIO_PCI and group is not None:
            make_device_node(self._dev / "vfio" / "vfio")
            make_device_node(self._dev / "vfio" / group)

    def _unbind(self, address: str, driver: str, path: Path) -> None:
        device = self._function(address)
        link = device / "driver"
        if not link.is_symlink() or os.path.basename(os.readlink(link)) != driver:
            raise OSError(errno.ENODEV, f"{address} is not bound to {driver}", str(path))
        link.unlink()
        (self._root / "bus" / "pci" / "drivers" / driver / address).unlink(missing_ok=True)
        group = _group(device)
        if driver == VFIO_PCI and group is not None and not self._vfio_functions(group):
            (self._dev / "vfio" / group).unlink(missing_ok=True)

    def _vfio_functions(self, group: str) -> list[str]:
        members = self._root / "kernel" / "iommu_groups" / group / "devices"
        return [
            entry.name
            for entry in members.iterdir()
            if (link := self._function(entry.name) / "driver").is_symlink()
            and os.path.basename(os.readlink(link)) == VFIO_PCI
        ]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""


def _group(device: Path) -> str | None:
    link = device / "iommu_group"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None
