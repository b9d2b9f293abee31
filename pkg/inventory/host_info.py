"""The host info service: OS, kernel release and bare-metal flag of the node the agent runs on.

In the DaemonSet the host's files are mounted under a prefix (``--host-root``, ``--sysfs-root``),
and the agent must read them as the host would. ``/etc/os-release`` is usually a symlink, and on
most distributions an *absolute* one (``/usr/lib/os-release``); followed naively inside the
container it would land on the container image's os-release and report the image's OS as the
node's. :func:`resolve_in_root` follows links as if ``host_root`` were ``/`` (a ``chroot``'s view),
and os-release(5)'s fallback ``/usr/lib/os-release`` is used when ``/etc/os-release`` is missing.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path, PurePosixPath
from typing import Protocol

from pkg.hardware.hostinfo import HostInfo, read_host_info

_MAX_LINKS = 40  # the kernel's limit on symlinks in one lookup (ELOOP past it)


class HostInfoReader(Protocol):
    def read(self) -> HostInfo:
        """Never raises: unreadable sources leave their fields ``None`` (bare metal: False)."""
        ...


def resolve_in_root(root: Path, path: str) -> Path:
    """``path`` (absolute, as the host names it) under ``root``, symlinks followed inside ``root``.

    A missing component ends resolution there (the caller's read then fails as "not found"); a
    link loop raises ``OSError(ELOOP)``.
    """
    pending = list(PurePosixPath(path).parts[1:])
    current, links = root, 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent if current != root else root
            continue
        candidate = current / part
        if not candidate.is_symlink():
            current = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OSError(errno.ELOOP, "too many levels of symbolic links", str(root / path.lstrip("/")))
        target = PurePosixPath(os.readlink(candidate))
        if target.is_absolute():
            current, pending = root, [*target.parts[1:], *pending]
        else:
            pending = [*target.parts, *pending]
    return current


class FileHostInfoReader:
    """Reads ``<host_root>/etc/os-release``, ``<host_root>/proc/sys/kernel/osrelease`` and
    ``<sysfs_root>/class/dmi/id``."""

    def __init__(self, *, host_root: Path, sysfs_root: Path) -> None:
        self._host_root = host_root
        self._sysfs_root = sysfs_root

    def read(self) -> HostInfo:
        return read_host_info(
            os_release=self._os_release(),
            kernel_osrelease=self._host_path("/proc/sys/kernel/osrelease"),
            dmi_dir=self._sysfs_root / "class" / "dmi" / "id",
        )

    def _os_release(self) -> Path:
        etc = self._host_path("/etc/os-release")
        return etc if etc.is_file() else self._host_path("/usr/lib/os-release")

    def _host_path(self, path: str) -> Path:
        try:
            return resolve_in_root(self._host_root, path)
        except OSError:
            return self._host_root / path.lstrip("/")  # unreadable: the read reports it as missing
