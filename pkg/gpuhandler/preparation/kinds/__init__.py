"""Device kinds: everything that differs between a whole card, a MIG device, a share, a partition,
a passed-through card and a vGPU, each kind in its own module, behind one contract.

A kind owns its device's whole life cycle (:class:`DeviceKind`):

* **plan** — which allocated offers are of this kind (``offers``, an :class:`OfferMatch`: data the
  registry matches, so planning a device never enters another kind's module), and the
  kind's part of the device's checkpoint record (:meth:`DeviceKind.plan`), read from the offer's
  attributes and the claim's configuration, refused with a :class:`PlanError` that names the claim;
* **record** — the model of that part (``record_model``), stored in the device's record under
  ``record_field``, and the oldest checkpoint reader that understands it (``reader_version``): a
  file holding it asks for that reader, so an older release refuses instead of misreading;
* **conflict** — whether the device can be prepared next to a device of the same kind already held
  on its card (:meth:`DeviceKind.conflict`); devices of two kinds on one card always conflict;
* **consumer** — whether a container uses the device through the vendor's driver (and so gets the
  driver's base CDI spec) or a VM does;
* **prepare** and **release** — from the device's record alone, written before anything changes on
  the node, so the record that prepared a device also releases it after a crash; ``release`` is
  idempotent: what is already gone is success;
* **start-up** — what the kind checks on the node once, before the plugin serves (MIG devices no
  record owns, MPS daemons of shares that are gone; :meth:`DeviceKind.reconcile_node`), and what it
  follows on the plugin's period from a fresh checkpoint (an MPS daemon that died, the cards held
  for VMs after another instance changed the record; :meth:`DeviceKind.follow`).

:class:`Kinds` is the registry the composition root declares (:mod:`..setup`): the pipeline, the
planner, the checkpoint and start-up loop over it and never name a kind, so a new kind is one
module and one registration (``test/fixtures/example_backend/example_device_kind.py`` proves it).
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeVar

from kubernetes.client import ResourceV1ResourceClaim, V1Device, V1DeviceRequestAllocationResult

from api.gpu.v1alpha1 import ComputeDomainChannelConfig, GpuConfig, SharingStrategy
from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.domain.names import DOMAIN
from pkg.dra.allocator.quantity import QuantityError, parse_quantity
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    ClaimRecord,
    DeviceRecord,
    KindRecord,
    RecordTypes,
)
from pkg.gpuhandler.preparation.failures import PrepareFailedError

# What the hardware can have, checked before anything is sized by a slice's numbers: a card has at
# most 8 MIG slots today (64 leaves room for any successor); no card has a pebibyte of memory, and
# no quantity we plan with is larger.
MAX_SLOTS: Final = 64
MAX_QUANTITY: Final = 1 << 50
_PCI_ADDRESS: Final = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")

R = TypeVar("R", bound=KindRecord)

# How the Pods reserving a claim ask for its devices as a VM's (a VM launcher's Pod): whole cards
# passed through, vGPUs. The scheduler's claims for extended resources carry no annotations of
# their own, so the Pod says it.
VFIO_ANNOTATION: Final = f"{DOMAIN}/vfio"


class PlanError(ValueError):
    """The allocation cannot be prepared here; the message names the claim."""


class Consumer(enum.Enum):
    """Who uses a prepared device: a container, through the vendor's driver, or a VM."""

    CONTAINER = "container"
    VM = "vm"


@dataclass(frozen=True)
class Offer:
    """One allocated device of the claim and the offer it was allocated from: what every kind
    plans from. ``where`` names the claim and the device for messages."""

    result: V1DeviceRequestAllocationResult
    device: V1Device
    config: GpuConfig | None
    # The physical card's PCI address; for an offer on no card (no ``pciAddress``: an IMEX
    # channel), the device's own name, which keys it wherever a card would (``on_card`` False).
    card: str
    device_type: str  # the offer's deviceType attribute (Physical, MIG, ...)
    sharing: SharingStrategy
    where: str
    on_card: bool = True
    domain: ComputeDomainChannelConfig | None = None  # the claim's compute domain, for a channel

    @property
    def name(self) -> str:
        return str(self.result.device)

    def attribute(self, name: str, kind: type, default: Any = None) -> Any:
        """The offer's attribute ``gpu.deckhouse.io/<name>`` of type ``kind`` (int or str)."""
        return attribute(self.device, name, kind, self.where, default)

    def bounded(self, name: str, low: int, high: int) -> int:
        """The int attribute ``name``, refused outside ``low``..``high``."""
        return bounded(self.attribute(name, int), low, high, name, self.where)

    def quantity(self, text: str, what: str) -> int:
        return quantity(text, what, self.where)


@dataclass(frozen=True)
class PlanContext:
    """What a kind may need of the claim besides its own offer: the claim as read, whether a VM's
    launcher consumes it, and the claim's record from an earlier, unfinished attempt (a retry keeps
    what that attempt chose and recorded: an mdev UUID, the functions' original drivers)."""

    claim: ResourceV1ResourceClaim
    label: str  # "claim <namespace>/<name>"
    for_vm: bool
    earlier: ClaimRecord | None = None

    def earlier_device(self, name: str) -> DeviceRecord | None:
        if self.earlier is None:
            return None
        return next((d for d in self.earlier.devices if d.device == name), None)


@dataclass(frozen=True)
class OfferMatch:
    """Which offers a kind takes: of ``device_type``, and where given, shared or not (a TimeSlicing
    or MPS offer is shared) and for a VM's claim or not."""

    device_type: str
    shared: bool | None = None
    for_vm: bool | None = None

    def matches(self, offer: Offer, *, for_vm: bool) -> bool:
        if offer.device_type != self.device_type:
            return False
        if self.shared is not None and self.shared != (offer.sharing is not SharingStrategy.EXCLUSIVE):
            return False
        return self.for_vm is None or self.for_vm == for_vm


@dataclass(frozen=True)
class Conflict:
    """Why a device cannot be prepared next to one already held: a reason and a phrase."""

    reason: str
    problem: str


ALREADY_PREPARED: Final = Conflict("DoubleAllocation", "is already prepared")


@dataclass
class ClaimWork:
    """What a kind reads and reports while it prepares or releases one claim's devices.

    ``record`` is the claim's checkpoint record (a kind may complete its own device's entry, as
    the MIG kind does with the instance it made); ``checkpoint`` shows the other claims on the
    node; ``resource`` is the claim as read from the API server (Prepare only). A kind adds the
    cards whose mode it changed to ``changed_cards`` (the enrichment looks at them again) and, the
    first time it switches a card's MIG mode, the mode it found to ``found_mig_modes`` (a
    rolled-back Prepare puts it back).
    """

    record: ClaimRecord
    checkpoint: CheckpointData
    resource: ResourceV1ResourceClaim | None = None
    changed_cards: set[str] = field(default_factory=set)
    found_mig_modes: dict[str, bool] = field(default_factory=dict)

    def others_on(self, card: str) -> list[ClaimRecord]:
        """The other claims with a device on ``card``, in any state."""
        return [c for c in self.checkpoint.claims_on_card(card) if c.uid != self.record.uid]

    def mig_mode_changed(self, card: str, *, found: bool) -> None:
        """Notes that ``card``'s MIG mode was switched away from ``found``."""
        self.found_mig_modes.setdefault(card, found)
        self.changed_cards.add(card)

    @property
    def label(self) -> str:
        return f"claim {self.record.namespace}/{self.record.name}"


@dataclass
class NodeReport:
    """What a kind's start-up check did: what it did, by action, and each failure with its card."""

    done: dict[str, list[str]] = field(default_factory=dict)  # what -> cards or devices
    failed: list[tuple[str, str]] = field(default_factory=list)  # (card, error)
    changed_cards: set[str] = field(default_factory=set)

    def add(self, what: str, item: str) -> None:
        self.done.setdefault(what, []).append(item)


class DeviceKind(ABC):
    """One kind of device: its plan, record, conflict rule, consumer, prepare and release."""

    name: ClassVar[str]  # for messages: "a <name>"
    offers: ClassVar[OfferMatch]  # the offers this kind plans
    record_field: ClassVar[str | None] = None  # None: the kind that has no record of its own
    record_model: ClassVar[type[KindRecord] | None] = None
    reader_version: ClassVar[int] = 1  # the oldest checkpoint reader that understands the record
    consumer: ClassVar[Consumer] = Consumer.CONTAINER
    on_card: ClassVar[bool] = True  # False: the kind's offers have no pciAddress (IMEX channels)
    node_step: ClassVar[str] = "node"  # the start-up step of reconcile_node, for reports and metrics

    def plan(self, offer: Offer, context: PlanContext) -> KindRecord | None:
        """The kind's part of the device's record, chosen before anything changes on the node."""
        return None

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        """Why ``device`` cannot be prepared next to ``held``, a device of this kind on its card;
        by default a card holds one device of a kind."""
        return ALREADY_PREPARED

    @abstractmethod
    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        """Makes ``device`` ready (idempotently) and returns what a container of it needs."""

    @abstractmethod
    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        """Undoes ``prepare`` for ``device``, or whatever part of it happened; idempotent."""

    def reconcile_node(self, checkpoint: CheckpointData, cards: Sequence[str]) -> NodeReport:
        """Start-up: what this kind leaves on the node matches the records (nothing by default)."""
        return NodeReport()

    def follow(self, checkpoint: CheckpointData) -> None:
        """The plugin's periodic round, with the checkpoint read fresh under the node lock (another
        instance, in a rolling update, may have changed it); nothing by default."""
        return


def record_of(device: DeviceRecord, kind: type[DeviceKind], model: type[R]) -> R:
    """``device``'s record of ``kind``, typed; a device of another kind is a bug (ValueError)."""
    assert kind.record_field is not None
    found = device.kind_record(kind.record_field, model)
    if found is None:
        raise ValueError(f"device {device.device} on card {device.card} is not a {kind.name}")
    return found


class UnknownKindError(LookupError):
    """A recorded device of no registered kind, or of several (a bug, or a record of a newer release)."""


class Kinds:
    """The registered kinds, in the order the composition root declares them: an offer is of the
    first kind that accepts it; a recorded device of the kind whose record field it holds, else of
    the kind without one."""

    def __init__(self, kinds: Sequence[DeviceKind]) -> None:
        self._kinds = tuple(kinds)
        fields = [k.record_field for k in self._kinds if k.record_field is not None]
        if len(set(fields)) != len(fields):
            raise ValueError(f"two kinds share a record field: {fields}")
        plain = [k.name for k in self._kinds if k.record_field is None]
        if len(plain) > 1:
            raise ValueError(f"more than one kind without a record field: {plain}")
        self.records = record_types(self._kinds)

    def __iter__(self) -> Iterator[DeviceKind]:
        return iter(self._kinds)

    def for_offer(self, offer: Offer, *, for_vm: bool) -> DeviceKind:
        for kind in self._kinds:
            if kind.offers.matches(offer, for_vm=for_vm):
                return kind
        raise PlanError(f"{offer.where} is a {offer.device_type} device of no kind this node prepares")

    def of(self, device: DeviceRecord) -> DeviceKind:
        marked = [k for k in self._kinds if k.record_field and device.has_kind_record(k.record_field)]
        plain = [k for k in self._kinds if k.record_field is None]
        found = marked or plain
        if len(found) != 1:
            raise UnknownKindError(
                f"device {device.device} on card {device.card} is of "
                + (f"{len(found)} kinds: {[k.name for k in found]}" if found else "no known kind")
            )
        return found[0]

    def in_container(self, device: DeviceRecord) -> bool:
        """Whether a container uses ``device`` through the vendor's driver (the base spec)."""
        return self.of(device).consumer is Consumer.CONTAINER

    def conflict(self, device: DeviceRecord, held: DeviceRecord) -> Conflict | None:
        """Why ``device`` cannot be prepared next to ``held`` on the same card, or None."""
        kind = self.of(device)
        if kind is not self.of(held):
            return ALREADY_PREPARED
        return kind.conflict(device, held)


def record_types(kinds: Iterable[DeviceKind | type[DeviceKind]]) -> RecordTypes:
    """What the checkpoint validates and versions: each kind's record model by field, the reader
    version it needs, and the device types the kinds record."""
    kinds = list(kinds)
    return RecordTypes(
        {
            k.record_field: (k.record_model, k.reader_version)
            for k in kinds
            if k.record_field is not None and k.record_model is not None
        },
        device_types=[k.offers.device_type for k in kinds],
    )


def require_free(preparer: CardPreparer, card: str, work: ClaimWork, *, to: str) -> None:
    """Refuses (``CardBusy``) to switch ``card`` ``to`` another mode while another claim is on it,
    in any state, or a process runs on it: a mode switch resets what runs there."""
    if others := work.others_on(card):
        raise PrepareFailedError(
            "CardBusy", f"{work.label}: card {card} must switch {to} but is prepared for {others[0]}"
        )
    if processes := list(preparer.processes(card)):
        raise PrepareFailedError(
            "CardBusy", f"{work.label}: card {card} must switch {to} but runs processes {processes}"
        )


def devices_of(checkpoint: CheckpointData, kind: DeviceKind) -> Iterable[tuple[ClaimRecord, DeviceRecord]]:
    """Every recorded device of ``kind`` (any state), with its claim."""
    assert kind.record_field is not None
    for claim in checkpoint.claims.values():
        for device in claim.devices:
            if device.has_kind_record(kind.record_field):
                yield claim, device


# Readers of an offer's attributes, shared by the kinds' plans: each refuses what does not fit
# with a PlanError naming the claim and the device (``where``).


def attribute(device: V1Device, name: str, kind: type, where: str, default: Any = None) -> Any:
    found = (device.attributes or {}).get(f"{DOMAIN}/{name}")
    value = None
    if found is not None:
        value = found.int if kind is int else found.string
    if value is None:
        if default is not None:
            return default
        raise PlanError(f"{where} has no {kind.__name__} attribute {DOMAIN}/{name}")
    return value


def bounded(value: int, low: int, high: int, name: str, where: str) -> int:
    if not low <= value <= high:
        raise PlanError(f"{where} has {name} {value}, not between {low} and {high}")
    return value


def quantity(text: str, what: str, where: str) -> int:
    try:
        value = parse_quantity(str(text))
    except QuantityError as exc:
        raise PlanError(f"{where} has {what} {text!r}: {exc}") from None
    whole = value.value()
    if whole < 0 or value.nanos != whole * 10**9:
        raise PlanError(f"{where} has {what} {text!r}, not a whole non-negative number")
    if whole > MAX_QUANTITY:
        raise PlanError(f"{where} has {what} {text!r}, over {MAX_QUANTITY} (more than a card can have)")
    return whole


def pci_address(value: str, where: str) -> str:
    """The card's PCI address, which names folders and sysfs paths: only ``dddd:bb:dd.f`` passes."""
    if not _PCI_ADDRESS.fullmatch(value):
        raise PlanError(f"{where} has pciAddress {value[:80]!r}, not a PCI address (0000:3b:00.0)")
    return value


def enum_value(kind: Any, value: str, name: str, where: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise PlanError(f"{where} has {name} {value!r}, not one of {[k.value for k in kind]}") from None
