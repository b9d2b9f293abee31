"""What happens to a simulated host's driver from outside: a card falling off the bus, a driver upgrade.

A real card that falls off the PCI bus (XID 79) stays listed by the kernel, but the driver can no
longer reach it: every NVML query of it answers ``GPU_IS_LOST`` until it comes back (a reset or a
re-seat). A real driver upgrade replaces the driver's files and, once the new kernel module is
loaded, NVML reports the new version. The simulation keeps both in the state folder, read on
every call so a running gpu-handler sees a change at once:

* ``<state-dir>/lost-cards.json``: the PCI addresses of the cards off the bus, a JSON list;
* ``<state-dir>/driver-version``: the version the loaded driver reports (absent: the simulated
  default, :data:`~pkg.backends.simulated.data.DRIVER_VERSION`).

They are written by :class:`pkg.devcluster.gpuhost.SimulatedGpuHost` (``unplug_card``,
``replug_card``, ``load_driver``), which, outside the product layers, writes the same files
without importing this module; a unit test holds the two to one format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

LOST_CARDS_FILE: Final = "lost-cards.json"
DRIVER_VERSION_FILE: Final = "driver-version"


def lost_cards(path: Path) -> frozenset[str]:
    """The addresses of the cards off the bus; none when the file is absent or unreadable (a
    half-written file cannot happen: writers replace it atomically)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return frozenset()
    return frozenset(str(address) for address in raw) if isinstance(raw, list) else frozenset()


def loaded_driver_version(path: Path, default: str) -> str:
    """The version of the driver loaded now: the file's, else ``default``."""
    try:
        version = path.read_text().strip()
    except OSError:
        return default
    return version or default
