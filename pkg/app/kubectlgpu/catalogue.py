"""What the ResourceSlices (and PhysicalGPUs) say about our devices, for ``kubectl gpu who``.

Read once per run and indexed three ways: by (pool, device), the key a claim's allocation result
names; by card, since what is free is decided card by card (:mod:`.free`); and the capacity of
each counter set, which says whether one more device of a card fits. A device's facts keep the
slice's own counter-consumption models, which the slice reader shares between devices, so the
catalogue costs little beyond the slices themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from api.gpu.v1alpha1.physicalgpu import LABEL_NODE, PhysicalGPU
from pkg.app.kubectlgpu.claims import node_of_pool
from pkg.domain.names import DRIVER
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
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


class Catalogue:
    """The devices of our driver by (pool, device), from whatever slices and PhysicalGPUs were
    read; also by card, with the capacity of each counter set, for what is free (:mod:`.free`)."""

    def __init__(self, slices: Sequence[V1ResourceSlice], gpus: Sequence[PhysicalGPU]):
        by_address = {
            (str((g.metadata.labels or {}).get(LABEL_NODE) or ""), g.status.pci_info.address): str(
                g.metadata.name
            )
            for g in gpus
            if g.status is not None and g.status.pci_info is not None and g.metadata.name
        }
        self.devices: dict[tuple[str, str], DeviceFacts] = {}
        self.by_card: dict[tuple[str, str], list[tuple[str, DeviceFacts]]] = {}
        self.counters: dict[tuple[str, str], dict[str, int]] = {}  # (pool, set) -> counter -> nanos
        for s in slices:
            if s.spec.driver != DRIVER or s.spec.pool is None:
                continue
            pool = str(s.spec.pool.name)
            for counter_set in s.spec.shared_counters or []:
                self.counters[(pool, str(counter_set.name))] = {
                    name: value
                    for name, counter in (counter_set.counters or {}).items()
                    if (value := nanos(counter.value)) is not None
                }
            for device in s.spec.devices or []:
                facts = _facts(device, by_address, node_of_pool(pool) or str(s.spec.node_name or ""))
                self.devices[(pool, str(device.name))] = facts
                self.by_card.setdefault((pool, facts.card), []).append((str(device.name), facts))


def nanos(text: object) -> int | None:
    try:
        return parse_quantity(str(text)).nanos
    except QuantityError:
        return None


def _string(device: V1Device, name: str) -> str:
    value = (device.attributes or {}).get(attribute(name))
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
