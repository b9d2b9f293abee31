"""PhysicalGPU names, and how an existing object is matched to its card.

Names have the shape ``<node>-<index>-<vendorID>-<deviceID>`` (docs/architecture.md#physicalgpu-names), with
``index`` the card's position among this node's GPU addresses in sorted order. A name is chosen once, when the
object is created, and never recomputed: objects are matched to cards by PCI address, carried in
the label :data:`ADDRESS_LABEL` (``0000:02:00.0`` as ``0000-02-00.0``, since ``:`` is not allowed
in label values). The label, not ``status.pciInfo.address``, is the key because it is in the
object from its first write (``create``) on, while the status arrives with the second request;
the status address is only a fallback for objects whose label someone removed.

So removing a card never renames its neighbours, and a new card takes its position index if no
existing object uses it, otherwise the lowest index no object of the node uses. An object deleted
by hand while its card stays is recreated under the name it had (remembered by the running agent).

Every name is a valid DNS subdomain: the node part is lower-cased and sanitised, and a node name
too long to fit is shortened to a prefix plus a hash of the whole name, so the node part depends on
the node alone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Final

from api.gpu.v1alpha1 import PhysicalGPU

ADDRESS_LABEL: Final = "gpu.deckhouse.io/pci-address"

MAX_NAME_LENGTH = 253
# "-" + up to 10 index digits + "-vvvv-dddd": the node part must leave room for the longest suffix.
_MAX_NODE_PART = MAX_NAME_LENGTH - 1 - 10 - 10
_HASH_LENGTH = 8
_INVALID = re.compile(r"[^a-z0-9-]+")


def address_key(address: str) -> str:
    """The label value of a PCI address: ``0000:02:00.0`` → ``0000-02-00.0``."""
    return address.lower().replace(":", "-")


def node_part(node_name: str) -> str:
    """The node's part of its GPUs' names: a DNS subdomain prefix, stable for one node name."""
    labels = (_INVALID.sub("-", label).strip("-") for label in node_name.lower().split("."))
    part = ".".join(label for label in labels if label) or "node"
    if len(part) <= _MAX_NODE_PART:
        return part
    digest = hashlib.sha256(node_name.encode()).hexdigest()[:_HASH_LENGTH]
    return f"{part[: _MAX_NODE_PART - _HASH_LENGTH - 1].rstrip('.-')}-{digest}"


def gpu_name(node_name: str, index: int, vendor_id: str, device_id: str) -> str:
    """``<node>-<index>-<vendorID>-<deviceID>``, lower-case and a valid DNS subdomain."""
    return f"{node_part(node_name)}-{index}-{vendor_id.lower()}-{device_id.lower()}"


def index_in_name(node_name: str, name: str) -> int | None:
    """The index of a name this node's agent gave, or ``None`` for any other name."""
    pattern = rf"{re.escape(node_part(node_name))}-(\d+)-[0-9a-f]{{4}}-[0-9a-f]{{4}}"
    match = re.fullmatch(pattern, name)
    return int(match.group(1)) if match else None


def object_address_key(gpu: PhysicalGPU) -> str | None:
    """The address key of an existing object: its label, else its status address."""
    label = (gpu.metadata.labels or {}).get(ADDRESS_LABEL)
    if label:
        return label
    pci = gpu.status.pci_info if gpu.status else None
    return address_key(pci.address) if pci else None


@dataclass(frozen=True)
class ObjectIndex:
    """This node's existing PhysicalGPUs, sorted out by what a sync must do with them."""

    owner: dict[str, PhysicalGPU] = field(default_factory=dict)  # address key → the object kept
    duplicates: list[PhysicalGPU] = field(default_factory=list)  # a second object for one address
    unidentified: list[PhysicalGPU] = field(default_factory=list)  # no address at all
    terminating: dict[str, PhysicalGPU] = field(default_factory=dict)  # being deleted by someone
    names: frozenset[str] = frozenset()  # every name in use, terminating ones included


def index_objects(existing: Iterable[PhysicalGPU]) -> ObjectIndex:
    """Groups objects by address; of two live objects for one address the older one is kept."""
    index = ObjectIndex(names=frozenset(str(gpu.metadata.name) for gpu in existing))
    for gpu in sorted(existing, key=_age):
        key = object_address_key(gpu)
        if key is None:
            index.unidentified.append(gpu)
        elif gpu.metadata.deletion_timestamp is not None:
            index.terminating[key] = gpu
        elif key in index.owner:
            index.duplicates.append(gpu)
        else:
            index.owner[key] = gpu
    return index


def allocate_name(
    *,
    node_name: str,
    position: int,
    vendor_id: str,
    device_id: str,
    taken: Collection[str],
    previous: str | None = None,
) -> str:
    """The name of a new object: ``previous`` (the name the card's last object had) if it is free,
    else the card's position index if free, else the lowest free index.

    An index is free when no name in ``taken`` uses it (whatever its IDs) and the full name is not
    taken either (a hand-made object may use it without following the pattern).
    """
    if previous is not None and previous not in taken:
        index = index_in_name(node_name, previous)
        if index is not None and previous == gpu_name(node_name, index, vendor_id, device_id):
            return previous
    used = {i for name in taken if (i := index_in_name(node_name, name)) is not None}
    candidates = [position, *range(len(taken) + 1)]
    for index in candidates:
        name = gpu_name(node_name, index, vendor_id, device_id)
        if index not in used and name not in taken:
            return name
    # Unreachable: len(taken) + 1 candidates and each taken name blocks at most one of them.
    raise ValueError(f"no free PhysicalGPU index on node {node_name!r}")


def _age(gpu: PhysicalGPU) -> tuple[float, str]:
    created = gpu.metadata.creation_timestamp
    return (created.timestamp() if created else float("inf"), str(gpu.metadata.name))
