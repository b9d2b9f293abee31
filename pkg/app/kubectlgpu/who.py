"""``kubectl gpu who``: which Pod and claim hold each of our cards, MIG devices and shares.

The rows come from ResourceClaims (``status.allocation.devices.results`` says what is held,
``status.reservedFor`` by which Pods), which a namespace user may read in their namespace. What
the claims do not say — the kind of device, the card's PhysicalGPU, UUID and PCI address — is
joined from ResourceSlices and PhysicalGPUs when the user may read them; otherwise those cells
show ``<unknown>`` and :mod:`.cli` says which read was refused. With ``--node`` and readable
slices, each card of the node that nobody holds gets a ``<free>`` row, so the answer covers the
whole node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from api.gpu.v1alpha1.physicalgpu import LABEL_NODE, PhysicalGPU
from pkg.app.kubectlgpu.claims import Held, held, node_of_pool
from pkg.app.kubectlgpu.table import Column, Row
from pkg.domain.names import DRIVER
from pkg.dra.model.attributes import key as attribute

if TYPE_CHECKING:
    from kubernetes.client import V1Device, V1ResourceSlice

KIND: Final = "GPUHolderList"
COLUMNS: Final = (
    Column("NAMESPACE"),
    Column("CLAIM"),
    Column("PODS"),
    Column("NODE"),
    Column("DEVICE"),
    Column("TYPE"),
    Column("PHYSICALGPU"),
    Column("REQUEST", wide=True),
    Column("SHARE-ID", wide=True),
    Column("PCI", wide=True),
    Column("UUID", wide=True),
    Column("PRODUCT", wide=True),
)
UNKNOWN: Final = "<unknown>"
FREE: Final = "<free>"


@dataclass(frozen=True)
class DeviceFacts:
    """What the slices (and PhysicalGPUs) say about one device."""

    kind: str  # Physical, MIG 1g.10gb, TimeSlicing share, ...
    card: str  # the card's counter set / base name: one per physical card
    pci: str
    uuid: str
    product: str
    physical_gpu: str


class Catalogue:
    """The devices of our driver by (pool, device), from whatever slices and PhysicalGPUs were read."""

    def __init__(self, slices: Sequence[V1ResourceSlice], gpus: Sequence[PhysicalGPU]):
        by_address = {
            (str((g.metadata.labels or {}).get(LABEL_NODE) or ""), g.status.pci_info.address): str(
                g.metadata.name
            )
            for g in gpus
            if g.status is not None and g.status.pci_info is not None and g.metadata.name
        }
        self.devices: dict[tuple[str, str], DeviceFacts] = {}
        for s in slices:
            if s.spec.driver != DRIVER or s.spec.pool is None:
                continue
            pool = str(s.spec.pool.name)
            for device in s.spec.devices or []:
                facts = _facts(device, by_address, node_of_pool(pool) or str(s.spec.node_name or ""))
                self.devices[(pool, str(device.name))] = facts

    def cards(self, node: str) -> dict[str, DeviceFacts]:
        """The node's whole cards (their Physical exclusive offer), by card."""
        return {
            f.card: f
            for (pool, _), f in self.devices.items()
            if node_of_pool(pool) == node and f.kind == "Physical"
        }


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
    return DeviceFacts(
        kind=kind or UNKNOWN,
        card=card,
        pci=pci,
        uuid=_string(device, "uuid"),
        product=_string(device, "productName"),
        physical_gpu=by_address.get((node, pci), ""),
    )


def who_view(
    claims: Sequence[dict[str, Any]], catalogue: Catalogue | None, *, node: str | None = None
) -> list[Row]:
    """One row per held device (on ``node`` only, when given), sorted by node, device, claim;
    with ``node`` and a catalogue, a ``<free>`` row for each card of the node nobody holds."""
    rows: list[tuple[tuple[str, ...], Row]] = []
    busy_cards: set[str] = set()
    for claim in claims:
        for h in held(claim):
            if node is not None and h.node != node:
                continue
            facts = catalogue.devices.get((h.pool, h.device)) if catalogue else None
            if facts is not None:
                busy_cards.add(facts.card)
            rows.append(((h.node, h.device, h.namespace, h.claim), _row(h, facts)))
    if node is not None and catalogue is not None:
        for card, facts in catalogue.cards(node).items():
            if card not in busy_cards:
                rows.append(((node, card, "", ""), _free_row(node, card, facts)))
    rows.sort(key=lambda pair: pair[0])
    return [row for _, row in rows]


def _row(h: Held, facts: DeviceFacts | None) -> Row:
    f = facts or DeviceFacts(UNKNOWN, "", "", "", "", "")
    cells = {
        "NAMESPACE": h.namespace,
        "CLAIM": h.claim,
        "PODS": ",".join(h.pods) or "<none>",
        "NODE": h.node or UNKNOWN,
        "DEVICE": h.device,
        "TYPE": f.kind,
        "PHYSICALGPU": f.physical_gpu or (UNKNOWN if facts is None else f.card),
        "REQUEST": h.request,
        "SHARE-ID": h.share_id or "",
        "PCI": f.pci,
        "UUID": f.uuid,
        "PRODUCT": f.product,
    }
    item = {
        "namespace": h.namespace,
        "claim": h.claim,
        "pods": list(h.pods),
        "node": h.node,
        "request": h.request,
        "pool": h.pool,
        "device": h.device,
        "shareID": h.share_id,
        "type": None if facts is None else f.kind,
        "physicalGPU": f.physical_gpu or None,
        "pciAddress": f.pci or None,
        "uuid": f.uuid or None,
    }
    return Row(cells, item)


def _free_row(node: str, card: str, f: DeviceFacts) -> Row:
    cells = {
        "NAMESPACE": "",
        "CLAIM": FREE,
        "PODS": "",
        "NODE": node,
        "DEVICE": card,
        "TYPE": "",
        "PHYSICALGPU": f.physical_gpu or card,
        "PCI": f.pci,
        "UUID": f.uuid,
        "PRODUCT": f.product,
    }
    item = {
        "node": node,
        "device": card,
        "free": True,
        "physicalGPU": f.physical_gpu or None,
        "uuid": f.uuid or None,
    }
    return Row(cells, item)
