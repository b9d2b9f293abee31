"""Device nodes on a simulated host: character devices with /dev/null's numbers.

The kernel makes ``/dev/vfio/<group>`` when a function or an mdev joins VFIO; the simulated
kernels (:mod:`.pci_kernel`, :mod:`.mdev_kernel`) make the same nodes with mknod so the code that
checks for them, and the container runtime that mounts them, see what they would on a real host.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

_NULL_DEVICE: Final = os.makedev(1, 3)


def make_device_node(path: Path) -> None:
    """A simulated device node at ``path`` (/dev/null's numbers), made once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        os.mknod(path, 0o666 | stat.S_IFCHR, _NULL_DEVICE)
        path.chmod(0o666)
