"""Puts the CDI hook program on the host, where the container runtime runs it.

The base CDI spec names a hook program by its host path (:mod:`pkg.backends.driver_files`); the
runtime runs it on the host while it creates each container, so it must exist there on every node
that has the spec, whatever is installed on the host. gpu-handler ships it in its image and copies
it into the node's plugin folder at start-up, under a name that carries a hash of its content
(``nvidia-cdi-hook-<sha256 prefix>``): a new release installs a new file beside the old one instead
of replacing a program the runtime may be running, and the spec names exactly the program that
was shipped with the gpu-handler that wrote it. Older copies stay for containers whose creation
read the earlier spec; each is one static binary of a few megabytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

from pkg.gpuhandler.preparation.atomic_file import write_atomically

_MAX_SIZE: Final = 64 << 20


def install_cdi_hook(source: Path, folder: Path) -> Path:
    """Copies ``source`` into ``folder`` under its content's name (unless there) and returns the
    installed path; ``OSError`` when it cannot."""
    with source.open("rb") as file:
        data = file.read(_MAX_SIZE + 1)
    if len(data) > _MAX_SIZE:
        raise OSError(f"{source}: larger than {_MAX_SIZE >> 20} MiB, not a hook program")
    target = folder / f"{source.name}-{hashlib.sha256(data).hexdigest()[:12]}"
    try:
        if target.read_bytes() == data:
            return target
    except OSError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(target, data, mode=0o755, durable=True)
    return target
