"""Writing a file so that a crash leaves either the old content or the new, never a mix.

Write a temporary file in the same folder, fsync it, rename it over the target, fsync the folder:
after a power loss or a kill -9 at any point, the target is complete (old or new) and only a
temporary file may remain (``.<name>.<random>.tmp``, which nothing reads and the next write of
the file removes). A kill -9 alone never
loses written data (it is in the page cache), so files that a power loss makes meaningless anyway —
CDI specs under /var/run, which a reboot empties and start-up reconciliation then forgets — are written
atomically but without the two fsyncs (``durable=False``), which cost milliseconds each.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
from pathlib import Path
from typing import Final


class AtomicWriteError(OSError):
    """A write that failed; the previous file is intact and no temporary file is left.

    An :class:`OSError` (with the cause's ``errno``) so that callers that handle I/O errors handle
    this one; its message names the file."""

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(cause.errno, f"cannot write {path}: {cause.strerror or cause}")
        self.path = path


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    """Replaces ``path`` with ``data``, atomically (and durably unless told otherwise).

    The temporary file is created exclusively under a fresh random name, without following a
    link (``O_CREAT|O_EXCL|O_NOFOLLOW``): a file or a link planted at a temporary path is never
    written through. Any failure removes the temporary file, leaves ``path`` as it was and raises
    :class:`AtomicWriteError` naming ``path``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(path)
        temporary, fd = _create_temporary(path, mode)
    except OSError as exc:
        raise AtomicWriteError(path, exc) from exc
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise AtomicWriteError(path, exc) from exc
        raise
    if durable:
        try:
            fsync_folder(path.parent)
        except OSError as exc:
            raise AtomicWriteError(path, exc) from exc


_TEMPORARY_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _remove_leftovers(path: Path) -> None:
    """Removes the temporary files of ``path`` that a killed earlier write left (writers of one
    path hold the node lock, so none is in use); ``unlink`` removes a link, never its target."""
    leftover = re.compile(rf"\.{re.escape(path.name)}(\.[0-9a-f]{{16}})?\.tmp")
    with os.scandir(path.parent) as entries:
        names = [entry.name for entry in entries if leftover.fullmatch(entry.name)]
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.parent / name)


def _create_temporary(path: Path, mode: int) -> tuple[Path, int]:
    """A new temporary file beside ``path`` (``.<name>.<random>.tmp``) and its descriptor."""
    for _ in range(100):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return temporary, os.open(temporary, _TEMPORARY_FLAGS, mode)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def remove_file(path: Path, *, durable: bool = True) -> bool:
    """Removes ``path`` (if present), durably unless told otherwise; returns whether it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    if durable:
        fsync_folder(path.parent)
    return True


def fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
