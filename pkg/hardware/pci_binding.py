"""Which kernel driver a PCI function is bound to, changed through sysfs (VFIO passthrough).

The kernel's own interface, nothing else: ``<device>/driver_override`` names the only driver that
may take the function next; ``<device>/driver/unbind`` releases it from its driver;
``bus/pci/drivers/<driver>/bind`` hands it to one. Binding to ``vfio-pci`` is those three writes,
and giving a function back is the same with the override cleared first (an empty write), so the
original driver may take it again. Every operation is idempotent — a function already where it
should be is left alone — because Prepare and Unprepare are repeated after any crash.

Writes go through :class:`SysfsKernel`: on a real host the kernel acts inside the ``write`` and
the port does nothing; on a simulated host (a fixture sysfs tree) a stand-in applies what the
kernel would (:mod:`pkg.backends.simulated.pci_kernel`), so this module runs unchanged in tests.
After a bind the driver link is checked, with a short bounded wait (the kernel binds inside the
write, but a driver's probe may fail without failing the write); a function that did not follow
is an :class:`OSError` naming it and both drivers.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol

VFIO_PCI: Final = "vfio-pci"
_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_DRIVER = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_NO_OVERRIDE = ("", "(null)")  # what the kernel shows when no override is set


class SysfsKernel(Protocol):
    """What happens after a write to a sysfs attribute (``value`` was written to ``path``)."""

    def written(self, path: Path, value: str) -> None: ...


class RealKernel:
    """On a real host the kernel has acted by the time ``write`` returns: nothing to do."""

    def written(self, path: Path, value: str) -> None:
        return None


class PciDriverBinding:
    """Binds PCI functions under ``sysfs_root`` to drivers, and gives them back."""

    def __init__(
        self,
        sysfs_root: Path,
        *,
        kernel: SysfsKernel | None = None,
        settle_timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._root = sysfs_root
        self._kernel = kernel or RealKernel()
        self._settle_timeout = settle_timeout
        self._clock = clock
        self._sleep = sleep

    def driver(self, address: str) -> str | None:
        """The driver bound to the function now, ``None`` when unbound."""
        link = self._device(address) / "driver"
        try:
            return os.path.basename(os.readlink(link))
        except FileNotFoundError:
            if not self._device(address).is_dir():
                raise OSError(errno.ENODEV, f"PCI function {address} does not exist", str(link)) from None
            return None

    def override(self, address: str) -> str | None:
        """The function's ``driver_override``, ``None`` when unset."""
        path = self._device(address) / "driver_override"
        value = path.read_text(encoding="ascii").strip()
        return None if value in _NO_OVERRIDE else value

    def bind(self, address: str, driver: str) -> None:
        """Binds the function to ``driver`` (override set, unbound, bound); no-op when it is."""
        _check_driver(driver)
        device = self._device(address)
        if self.override(address) != driver:
            self._write(device / "driver_override", driver)
        current = self.driver(address)
        if current == driver:
            return
        if current is not None:
            self._write(device / "driver" / "unbind", address)
        self._bind_to(address, driver)

    def restore(self, address: str, driver: str | None) -> None:
        """Gives the function back to ``driver`` (``None``: leaves it unbound), override cleared."""
        if driver is not None:
            _check_driver(driver)
        device = self._device(address)
        if self.override(address) is not None:
            self._write(device / "driver_override", "\n")
        current = self.driver(address)
        if current == driver:
            return
        if current is not None:
            self._write(device / "driver" / "unbind", address)
        if driver is not None:
            self._bind_to(address, driver)

    def _bind_to(self, address: str, driver: str) -> None:
        drivers = self._root / "bus" / "pci" / "drivers" / driver
        if not drivers.is_dir():
            raise OSError(errno.ENOENT, f"driver {driver} is not loaded (no {drivers})", str(drivers))
        self._write(drivers / "bind", address)
        deadline = self._clock() + self._settle_timeout
        while (current := self.driver(address)) != driver:
            if self._clock() >= deadline:
                raise OSError(
                    errno.EIO,
                    f"PCI function {address} is bound to {current or 'no driver'} "
                    f"after binding it to {driver}",
                    str(drivers / "bind"),
                )
            self._sleep(0.05)

    def _device(self, address: str) -> Path:
        if not _ADDRESS.fullmatch(address):
            raise ValueError(f"{address!r} is not a PCI address (dddd:bb:dd.f, lower-case)")
        return self._root / "bus" / "pci" / "devices" / address

    def _write(self, path: Path, value: str) -> None:
        write_attribute(path, value, self._kernel)


def write_attribute(path: Path, value: str, kernel: SysfsKernel) -> None:
    """One write to a sysfs attribute: a regular file that exists (never created here); then
    ``kernel`` applies what the kernel does inside the write (nothing on a real host)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a sysfs attribute (not a regular file)", str(path))
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)
    kernel.written(path, value)


def _check_driver(driver: str) -> None:
    if not _DRIVER.fullmatch(driver):
        raise ValueError(f"{driver!r} is not a kernel driver name")
