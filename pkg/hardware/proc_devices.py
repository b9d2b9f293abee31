"""The character-device majors a host's kernel has handed out, from ``<proc>/devices``.

A driver that registers a character device at run time gets its major number dynamically, so the
only way to make a device node for it (mknod) is to read the number the kernel lists under
"Character devices:" in ``/proc/devices`` — as the NVIDIA driver's own tools do for
``nvidia-caps`` and ``nvidia-caps-imex-channels``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pkg.hardware.files import read_text

PROC_DEVICES_LIMIT: Final = 64 * 1024  # a few hundred lines on any host


def character_majors(proc_root: Path) -> dict[str, int]:
    """Every character device's major by name; :class:`OSError` when the file cannot be read."""
    text = read_text(proc_root / "devices", limit=PROC_DEVICES_LIMIT)
    majors: dict[str, int] = {}
    in_character = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":"):
            in_character = stripped == "Character devices:"
            continue
        number, _, name = stripped.partition(" ")
        if in_character and number.isdigit() and name.strip():
            majors.setdefault(name.strip(), int(number))
    return majors


def character_major(proc_root: Path, name: str) -> int | None:
    """The major of the character device ``name``, or None when the kernel lists none (or the file
    cannot be read: a host without the driver loaded has nothing to offer either way)."""
    try:
        return character_majors(proc_root).get(name)
    except OSError:
        return None
