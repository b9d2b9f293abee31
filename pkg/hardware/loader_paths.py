"""Where a root's dynamic loader looks for shared libraries, read from that root's files.

The folders ``ldconfig`` of the root would put into its cache, in its order: those its
``etc/ld.so.conf`` names (``include`` lines followed, globs expanded, each path taken under the
root, never the reader's own ``/``), then glibc's built-in folders for this machine (the multiarch
ones first), then the root's own ``lib64`` and ``lib`` — which is also
where a driver installed into a folder of its own (``/usr/local/nvidia``) keeps its libraries.
Reading is bounded (256 configuration files of 64 KiB each): a hostile root cannot make it long.
"""

from __future__ import annotations

import glob
import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Final

_MULTIARCH: Final = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
_MAX_CONF_FILES: Final = 256
_MAX_CONF_BYTES: Final = 64 * 1024


def library_folders(root: Path) -> list[Path]:
    """The folders the root's dynamic loader searches, in its order, that exist."""
    candidates = list(_ld_so_conf_folders(root))
    triplet = _MULTIARCH.get(platform.machine())
    system = ([f"lib/{triplet}", f"usr/lib/{triplet}"] if triplet else []) + [
        "lib64",
        "usr/lib64",
        "lib",
        "usr/lib",
    ]
    candidates += [root / folder for folder in system]
    seen: set[Path] = set()
    folders = []
    for folder in candidates:
        if folder not in seen and folder.is_dir():
            seen.add(folder)
            folders.append(folder)
    return folders


def _ld_so_conf_folders(root: Path) -> Iterator[Path]:
    """The folders ``<root>/etc/ld.so.conf`` names, includes followed, paths taken under ``root``."""
    pending = [root / "etc/ld.so.conf"]
    read = 0
    while pending and read < _MAX_CONF_FILES:
        conf = pending.pop(0)
        read += 1
        try:
            with conf.open("rb") as file:
                text = file.read(_MAX_CONF_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if line.startswith("include"):
                pattern = line.removeprefix("include").strip()
                base = root if pattern.startswith("/") else conf.parent
                pending += sorted(Path(p) for p in glob.glob(str(base / pattern.lstrip("/"))))
            elif line.startswith("/"):
                yield root / line.lstrip("/")
