"""Attribute and quantity values of offers, in the forms the API server accepts and keeps.

* Keys are qualified names in our domain (``gpu.deckhouse.io/deviceType``): the domain makes them
  ours in ``matchAttribute`` constraints, and CEL finds them as
  ``device.attributes["gpu.deckhouse.io"].deviceType``.
* ``driverVersion`` is a *version* value, so selectors can compare it with ``semver()``; NVIDIA
  prints ``580.76.05``, whose ``05`` semver forbids, so it becomes ``580.76.5``. A version that is
  not numeric is left out rather than published as a string of another type.
* String values are at most 64 bytes; the product name is clipped.
* Quantities are written in the canonical form the server stores (``24576Mi`` is kept as ``24Gi``),
  so what we read back compares equal to what we wrote.
"""

from __future__ import annotations

import re

from kubernetes.client import V1DeviceAttribute

from pkg.domain.names import DOMAIN
from pkg.dra.model.card import Card
from pkg.dra.model.limits import MAX_ATTRIBUTE_VALUE_LENGTH

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
# Kubernetes' standard topology attributes (k8s.io/dynamic-resource-allocation/deviceattribute):
# other drivers (NICs) publish them too, so one claim can match devices of both (docs/topology.md).
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_NODE = "resource.kubernetes.io/numaNode"
NVLINK_DOMAIN = f"{DOMAIN}/nvlinkDomain"  # ours: NVLink has no standard attribute

_NUMERIC_VERSION = re.compile(r"\d+(\.\d+){0,2}")
_COMPUTE_CAPABILITY = re.compile(r"(\d+)\.(\d+)")
_BINARY_SUFFIXES = ("Mi", "Gi", "Ti", "Pi", "Ei")

AttributeValue = str | int | bool


class Version(str):
    """A string published as a ``version`` attribute rather than a ``string`` one."""

    __slots__ = ()


def key(name: str) -> str:
    """The qualified key of one of our attributes: ``deviceType`` → ``gpu.deckhouse.io/deviceType``."""
    return f"{DOMAIN}/{name}"


def to_attribute(value: AttributeValue) -> V1DeviceAttribute:
    if isinstance(value, Version):
        return V1DeviceAttribute(version=str(value))
    if isinstance(value, bool):
        return V1DeviceAttribute(bool=value)
    if isinstance(value, int):
        return V1DeviceAttribute(int=value)
    return V1DeviceAttribute(string=value)


def clip(text: str) -> str:
    """At most 64 bytes of UTF-8 (the API counts bytes), never splitting a character."""
    return text.encode()[:MAX_ATTRIBUTE_VALUE_LENGTH].decode(errors="ignore")


def semantic_version(text: str | None) -> Version | None:
    """``580.76.05`` → ``580.76.5``, ``565.77`` → ``565.77.0``; ``None`` when not numeric."""
    if text is None or _NUMERIC_VERSION.fullmatch(text.strip()) is None:
        return None
    parts = [int(p) for p in text.strip().split(".")]
    return Version(".".join(str(p) for p in [*parts, 0, 0][:3]))


def mib_quantity(mib: int) -> str:
    """Canonical binary quantity of ``mib`` MiB: 24576 → ``24Gi``, 5952 → ``5952Mi``, 0 → ``0``."""
    if mib == 0:
        return "0"
    value, suffix = mib, 0
    while value % 1024 == 0 and suffix < len(_BINARY_SUFFIXES) - 1:
        value, suffix = value // 1024, suffix + 1
    return f"{value}{_BINARY_SUFFIXES[suffix]}"


def card_identity(card: Card) -> dict[str, AttributeValue]:
    """Attributes every offer of a card carries: they name the card, whatever the offer is.

    ``uuid`` and ``pciAddress`` are the *card's* on MIG offers too (a MIG instance has no UUID
    until it is created), so a ``matchAttribute`` on them means "on the same card".

    ``vmOnly`` (``true``, present only then) marks a card whose host driver is NVIDIA's vGPU
    manager: it runs no CUDA on the host, so none of its offers is of use to a container. A
    class for containers leaves such cards out with ``!has(...vmOnly)``, and a class for VMs picks
    them: without it, a container asking for a whole card could take the card a VM needs.
    """
    attrs: dict[str, AttributeValue] = {
        key("vendor"): card.vendor,
        key("device"): card.device,
        key("pciAddress"): card.pci_address,
        key("productName"): clip(card.product_name),
    }
    if card.vgpu_mode:
        attrs[key("vmOnly")] = True
    if card.uuid:
        attrs[key("uuid")] = card.uuid
    if card.architecture:
        attrs[key("architecture")] = card.architecture
    if (version := semantic_version(card.driver_version)) is not None:
        attrs[key("driverVersion")] = version
    if card.compute_capability and (cc := _COMPUTE_CAPABILITY.fullmatch(card.compute_capability)):
        attrs[key("ccMajor")] = int(cc.group(1))
        attrs[key("ccMinor")] = int(cc.group(2))
    return attrs | card_topology(card)


def card_topology(card: Card) -> dict[str, AttributeValue]:
    """Where the card sits: its PCIe root, NUMA node and NVLink domain, each only when known.

    Every offer of the card carries them (a MIG device or a share sits where its card sits), so a
    claim can keep a GPU next to its NIC (``matchAttribute: resource.kubernetes.io/pcieRoot``) or
    several GPUs in one NVLink domain, whatever each request asks for.
    """
    attrs: dict[str, AttributeValue] = {}
    if card.pcie_root:
        attrs[PCIE_ROOT] = card.pcie_root
    if card.numa_node is not None:
        attrs[NUMA_NODE] = card.numa_node
    if card.nvlink_domain:
        attrs[NVLINK_DOMAIN] = clip(card.nvlink_domain)
    return attrs
