"""Writing a file so that a crash leaves either the old content or the new, never a mix.

Write a temporary file in the same folder, fsync it, rename it over the target, fsync the folder:
after a power loss or a kill -9 at any point, the target is complete (old or new) and only a
temporary file may remain, which the next write replaces. A kill -9 alone never loses written
data (it is in the page cache), so files that a power loss makes meaningless anyway — CDI specs
under /var/run, which a reboot empties and start-up reconciliation then forgets — are written
atomically but without the two fsyncs (``durable=False``), which cost milliseconds each.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600, durable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if durable:
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    if durable:
        fsync_folder(path.parent)


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
