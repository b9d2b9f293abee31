"""What the ResourceSlices (and PhysicalGPUs) say about our devices, for ``kubectl gpu who``.

Read once per run and indexed three ways: by (pool, device), the key a claim's allocation result
names; by card, since what is free is decided card by card (:mod:`.free`); and the capacity of
each counter set, which says whether one more device of a card fits. A device's facts are worked
out when first asked for, and keep the slice's own counter-consumption models, which the slice
reader shares between devices, so the catalogue costs little beyond the slices themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Final

from api.gpu.v1alpha1 import IMEX_CHANNEL_DEVICE_TYPE
from api.gpu.v1alpha1.physicalgpu import LABEL_NODE, PhysicalGPU
from pkg.app.kubectlgpu.claims import node_of_pool
from pkg.domain.names import DRIVER
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
from pkg.dra.explain.slice_reader import paused_gc
from pkg.dra.model.attributes import key as attribute

if TYPE_CHECKING:
    from kubernetes.client import V1Device, V1DeviceCounterConsumption, V1ResourceSlice

UNKNOWN: Final = "<unknown>"
EXCLUSIVE: Final = "Exclusive"


@dataclass(frozen=True)
class DeviceFacts:
    """What the slices (and PhysicalGPUs) say about one device."""

    kind: str  # Physical, MIG 1g.10gb, TimeSlicing share, ...
    card: str  # the card's counter set / base name: one per physical card
    pci: str
    uuid: str
    product: str
    physical_gpu: str
    strategy: str = EXCLUSIVE  # sharingStrategy: Exclusive, TimeSlicing or MPS
    memory: int | None = None  # the device's memory capacity in bytes, where it publishes one
    consumes: Sequence[V1DeviceCounterConsumption] = ()  # the slice's own (shared) models

    @property
    def shared(self) -> bool:
        return self.strategy != EXCLUSIVE

    @property
    def channel(self) -> bool:
        """An IMEX channel of a compute domain: on no card, its own "card" in the catalogue."""
        return self.kind == IMEX_CHANNEL_DEVICE_TYPE


class Catalogue:
    """The devices of our driver by (pool, device), from whatever slices and PhysicalGPUs were
    read; also by card, with the capacity of each counter set, for what is free (:mod:`.free`).

    A device's facts are worked out when first asked for: the held devices are a few of the
    cluster's (at 1,000 nodes, 4,000 of 224,000), and ``who`` without ``--free`` or ``--node`` asks
    for no others, so it pays for indexing the devices, not for reading each one's attributes. The
    view by card needs every device's facts and is built on first use."""

    def __init__(self, slices: Sequence[V1ResourceSlice], gpus: Sequence[PhysicalGPU]):
        self._by_address = {
            (str((g.metadata.labels or {}).get(LABEL_NODE) or ""), g.status.pci_info.address): str(
                g.metadata.name
            )
            for g in gpus
            if g.status is not None and g.status.pci_info is not None and g.metadata.name
        }
        self._raw: dict[tuple[str, str], tuple[V1Device, str]] = {}  # (pool, device) -> (device, node)
        self._facts: dict[tuple[str, str], DeviceFacts] = {}
        self._slices = [s for s in slices if s.spec.driver == DRIVER and s.spec.pool is not None]
        with paused_gc():  # a bulk build beside millions of live slice objects, as their read is
            for s in self._slices:
                pool = str(s.spec.pool.name)
                node = node_of_pool(pool) or str(s.spec.node_name or "")
                for device in s.spec.devices or []:
                    self._raw[(pool, str(device.name))] = (device, node)

    def facts(self, pool: str, device: str) -> DeviceFacts | None:
        """What the slices say about ``device`` of ``pool``; None for a device no slice read lists."""
        key = (pool, device)
        known = self._facts.get(key)
        if known is None and (raw := self._raw.get(key)) is not None:
            known = self._facts[key] = _facts(raw[0], self._by_address, raw[1])
        return known

    @cached_property
    def by_card(self) -> dict[tuple[str, str], list[tuple[str, DeviceFacts]]]:
        """Every device, grouped by (pool, card), in the slices' order."""
        cards: dict[tuple[str, str], list[tuple[str, DeviceFacts]]] = {}
        with paused_gc():
            for pool, device in self._raw:
                facts = self.facts(pool, device)
                assert facts is not None  # every key of _raw has facts
                cards.setdefault((pool, facts.card), []).append((device, facts))
        return cards

    @cached_property
    def counters(self) -> dict[tuple[str, str], dict[str, int]]:
        """The capacity of every counter set: (pool, set) -> counter -> nanos."""
        return {
            (str(s.spec.pool.name), str(counter_set.name)): {
                name: value
                for name, counter in (counter_set.counters or {}).items()
                if (value := nanos(counter.value)) is not None
            }
            for s in self._slices
            for counter_set in s.spec.shared_counters or []
        }


def nanos(text: object) -> int | None:
    try:
        return parse_quantity(str(text)).nanos
    except QuantityError:
        return None


_KEYS: Final = {
    name: attribute(name)
    for name in ("deviceType", "migProfile", "sharingStrategy", "pciAddress", "uuid", "productName")
}  # qualified once: --free reads them for every device


def _string(device: V1Device, name: str) -> str:
    value = (device.attributes or {}).get(_KEYS[name])
    return str(value.string) if value is not None and value.string is not None else ""


def _facts(device: V1Device, by_address: dict[tuple[str, str], str], node: str) -> DeviceFacts:
    kind = _string(device, "deviceType")
    if kind == "MIG":
        kind = f"MIG {_string(device, 'migProfile')}".strip()
    elif (sharing := _string(device, "sharingStrategy")) and sharing != "Exclusive":
        kind = f"{sharing} share"
    pci = _string(device, "pciAddress")
    counters = device.consumes_counters or []
    card = str(counters[0].counter_set) if counters else str(device.name)
    memory = (device.capacity or {}).get("memory")
    return DeviceFacts(
        kind=kind or UNKNOWN,
        card=card,
        pci=pci,
        uuid=_string(device, "uuid"),
        product=_string(device, "productName"),
        physical_gpu=by_address.get((node, pci), ""),
        strategy=_string(device, "sharingStrategy") or EXCLUSIVE,
        memory=None if memory is None or (n := nanos(memory.value)) is None else n // 10**9,
        consumes=counters,
    )
