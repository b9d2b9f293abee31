"""The host info service: OS, kernel release and bare-metal flag of the node the agent runs on.

In the DaemonSet the host's files are mounted under a prefix (``--host-root``, ``--sysfs-root``),
and the agent must read them as the host would. ``/etc/os-release`` is usually a symlink, and on
most distributions an *absolute* one (``/usr/lib/os-release``); followed naively inside the
container it would land on the container image's os-release and report the image's OS as the
node's. :func:`resolve_in_root` follows links as if ``host_root`` were ``/`` (a ``chroot``'s view),
and os-release(5)'s fallback ``/usr/lib/os-release`` is used when ``/etc/os-release`` is missing.
A path that cannot be resolved inside the root (a link loop) is a failed read — never a reason to
read the same path outside it.

**The last known value is kept.** A source that exists but fails to read (see
:class:`pkg.hardware.hostinfo.Reading`) says nothing new about the host, so the reader answers with
what that source said last time, and only a source that is really gone (or reads as something
else) changes a fact. Without that, one failed DMI read would flip the node's ``baremetal``
label to ``false`` and one failed os-release read would remove its OS labels. A failure with
nothing known yet (the first read of the process) stays in :attr:`HostInfo.failed`, and the
desired state leaves the Node's labels of that source as they are.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Protocol, TypeVar

from pkg.hardware.hostinfo import (
    CPU,
    DMI,
    KERNEL,
    OS_RELEASE,
    HostInfo,
    Reading,
    host_info_from,
    read_cpu_flags,
    read_dmi,
    read_kernel_release,
    read_os_release,
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_MAX_LINKS = 40  # the kernel's limit on symlinks in one lookup (ELOOP past it)


class HostInfoReader(Protocol):
    def read(self) -> HostInfo:
        """Never raises: absent sources leave their fields ``None`` (bare metal: False); a failed
        read keeps the last known value, or is listed in ``failed`` when there is none."""
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
    """Reads ``<host_root>/etc/os-release``, ``<host_root>/proc/sys/kernel/osrelease``,
    ``<host_root>/proc/cpuinfo`` and ``<sysfs_root>/class/dmi/id``; keeps the last known values.

    One instance per process (the node agent's container holds it as a singleton), since the
    last known values live in it. Not thread-safe; the agent's sync is single-worker.
    """

    def __init__(self, *, host_root: Path, sysfs_root: Path) -> None:
        self._host_root = host_root
        self._sysfs_root = sysfs_root
        self._last: HostInfo | None = None

    def read(self) -> HostInfo:
        fresh = host_info_from(
            os_release=self._read_os_release(),
            kernel=self._read(read_kernel_release, "/proc/sys/kernel/osrelease"),
            dmi=read_dmi(self._sysfs_root / "class" / "dmi" / "id"),
            cpu_flags=self._read(read_cpu_flags, "/proc/cpuinfo"),
        )
        info = _keep_last_known(fresh, self._last)
        for source, failure in fresh.failed:
            kept = source not in info.failed_sources()
            logger.warning(
                "host info source unreadable; %s",
                "keeping its last known value" if kept else "nothing known yet",
                extra={"source": source, "error": failure},
            )
        self._last = info
        return info

    def _read_os_release(self) -> Reading[dict[str, str]]:
        try:
            path = resolve_in_root(self._host_root, "/etc/os-release")
            if not path.exists():  # os-release(5): /usr/lib/os-release when /etc has none
                path = resolve_in_root(self._host_root, "/usr/lib/os-release")
        except OSError as err:
            return Reading(failure=f"os-release under {self._host_root}: {err.strerror or err}")
        return read_os_release(path)

    def _read(self, read: Callable[[Path], Reading[_T]], host_path: str) -> Reading[_T]:
        try:
            path = resolve_in_root(self._host_root, host_path)
        except OSError as err:
            return Reading(failure=f"{host_path} under {self._host_root}: {err.strerror or err}")
        return read(path)


def _keep_last_known(fresh: HostInfo, last: HostInfo | None) -> HostInfo:
    """``fresh`` with the fields of each failed source taken from ``last`` (when there is one)."""
    if last is None or not fresh.failed:
        return fresh
    failed = fresh.failed_sources()
    update: dict[str, object] = {}
    still_failed = set(failed)
    if OS_RELEASE in failed and OS_RELEASE not in last.failed_sources():
        update.update(os_id=last.os_id, os_version=last.os_version, os_name=last.os_name)
        still_failed.discard(OS_RELEASE)
    if KERNEL in failed and KERNEL not in last.failed_sources():
        update.update(kernel_release=last.kernel_release)
        still_failed.discard(KERNEL)
    if failed & {DMI, CPU} and not last.failed_sources() & {DMI, CPU}:
        reason = f"kept the last known value ({last.bare_metal_reason}): {fresh.bare_metal_reason}"
        update.update(bare_metal=last.bare_metal, bare_metal_reason=reason)
        still_failed -= {DMI, CPU}
    update["failed"] = tuple((s, f) for s, f in fresh.failed if s in still_failed)
    return dataclasses.replace(fresh, **update)  # type: ignore[arg-type]
