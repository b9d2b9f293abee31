"""Where a PCI function sits on its host: its PCIe root complex and its NUMA node.

Kubernetes standardised two device attributes for this, so that devices of *different* drivers (a
GPU and the NIC next to it) can be matched by a claim's ``matchAttribute`` constraint
(docs/topology.md):

* ``resource.kubernetes.io/pcieRoot``: the root complex, ``pci<domain>:<bus>``;
* ``resource.kubernetes.io/numaNode``: the function's NUMA node, an integer.

Both are only worth anything if every driver computes them the same way, so this module computes
them exactly as Kubernetes' own helpers in ``k8s.io/dynamic-resource-allocation/deviceattribute``
do, and ``test/unit/hardware/test_pci_topology_kubernetes.py`` compares the two on every fixture
host tree:

* the root is found by reading the link ``<sysfs>/bus/pci/devices/<address>`` (relative, as the
  kernel makes it), resolving it against that folder, and taking the first folder under
  ``devices/`` — ``devices/pci0000:15/0000:15:01.0/…/0000:18:00.0`` has the root ``pci0000:15``,
  however many root ports and switch ports sit in between. The link must point into
  ``devices/pci…`` and end in the address itself; anything else (an absolute link, a link
  elsewhere) has no root.
* Kubernetes accepts only the 4-digit-domain form of an address
  (``^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-9a-f]$``): a function behind Intel VMD
  (domain ``10000``) gets neither attribute here, as it would get none from Kubernetes.
* the NUMA node is ``numa_node``; ``-1`` (no affinity) means no attribute — a ``-1`` published by
  every NUMA-less device would make them all "match" each other.

A value that cannot be read is ``None``: the attribute is left out, never guessed
(docs/architecture.md#a-field-without-a-source-is-left-out).
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from pkg.hardware.pci import read_numa_node

logger = logging.getLogger(__name__)

# The address form Kubernetes' helpers accept (deviceattribute.verifyPCIBDFFormat).
_KUBERNETES_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
_DEVICES_PREFIX = "devices/pci"


@dataclass(frozen=True, slots=True)
class PciPlacement:
    """Where one function sits; each part ``None`` when its source did not say."""

    pcie_root: str | None = None  # "pci0000:15"
    numa_node: int | None = None


def pcie_root(sysfs_root: Path, address: str) -> str | None:
    """The PCIe root complex of the function at ``address``, or ``None`` (see the module docs)."""
    if _KUBERNETES_ADDRESS.fullmatch(address) is None:
        return None
    folder = "bus/pci/devices"
    try:
        target = os.readlink(sysfs_root / folder / address)
    except OSError:
        return None
    if posixpath.isabs(target):
        return None
    resolved = posixpath.normpath(posixpath.join(folder, target))
    if not resolved.startswith(_DEVICES_PREFIX) or posixpath.basename(resolved) != address:
        return None
    return resolved.removeprefix("devices/").split("/")[0]


class SysfsPciTopology:
    """Reads :class:`PciPlacement` of a function from one sysfs root; stateless and thread-safe."""

    def __init__(self, sysfs_root: Path) -> None:
        self._root = sysfs_root

    def placement(self, address: str) -> PciPlacement:
        if _KUBERNETES_ADDRESS.fullmatch(address) is None:
            return PciPlacement()
        try:
            numa = read_numa_node(self._root, address)
        except (OSError, ValueError) as exc:  # a broken numa_node: left out, the card still offered
            logger.warning(
                "cannot read the NUMA node of %s: %s", address, exc, extra={"pci_address": address}
            )
            numa = None
        return PciPlacement(pcie_root=pcie_root(self._root, address), numa_node=numa)
