"""Reading a small host file — a sysfs attribute, a procfs value, os-release, pci.ids — within bounds.

The files the adapters read are supposed to be small regular files, but a path under a host root
or a sysfs root can be anything: a FIFO (``read`` blocks until a writer appears, forever), a
device (``/dev/zero`` never ends; ``/dev/tty`` blocks), a symlink to either, a file of gigabytes.
So every read here:

* opens without blocking (``O_NONBLOCK``: opening a FIFO must not wait for a writer) and without
  making a terminal the controlling one (``O_NOCTTY``);
* refuses anything that ``fstat`` does not call a regular file — sysfs attributes, procfs values
  and ordinary files all are — before reading a byte;
* reads at most ``limit`` bytes and fails when there is more.

Failures are :class:`OSError` (the callers already treat "could not read" as one kind of
failure), with the path and the reason in the message.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

SYSFS_ATTRIBUTE_LIMIT = 4096  # a sysfs attribute is at most one page (PAGE_SIZE)


def read_bytes(path: Path, *, limit: int) -> bytes:
    """The content of the regular file ``path``; :class:`OSError` for anything else or more."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(mode)})", str(path))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return b"".join(chunks)


def read_text(path: Path, *, limit: int = SYSFS_ATTRIBUTE_LIMIT, encoding: str = "ascii") -> str:
    """:func:`read_bytes` decoded strictly; undecodable content is a :class:`ValueError`."""
    data = read_bytes(path, limit=limit)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not {encoding} (byte {err.start})") from None


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a file"


__all__ = ["SYSFS_ATTRIBUTE_LIMIT", "read_bytes", "read_text"]
