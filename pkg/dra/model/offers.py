"""The offers of one card: what it can become, published as DRA devices that share counters.

A card is offered in every mode at once — whole (``Physical``), shared by time slicing
or MPS, and as every MIG instance at every placement — and the counters make the modes exclude
each other whoever allocates, the kube-scheduler or gpu-dra-controller (shared counters are
those of KEP-4815, partitionable devices:
https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/4815-dra-partitionable-devices):

* the counter set, named like the card (``gpu-0000-02-00-0``), holds ``memory`` (bytes),
  ``memory-slice-0..N-1`` (1 each) and the engine counts the model has;
* the Physical offer and both shared offers consume **every** counter, so none of them fits next
  to anything else on the card; the scheduler charges a shared offer's counters once while any
  share is allocated, so shares of one strategy stack and the two strategies never mix;
* a MIG offer consumes its memory, the memory slices of its placement and its engines, so two
  MIG offers fit together exactly when their placements do not overlap (and the engines last);
* a card in vGPU mode has vGPU offers instead of MIG and shared ones (:mod:`.vgpu_offers`).

Shared offers carry ``allowMultipleAllocations`` and consumable capacities. On such a device every
capacity is consumed by each share, so ``sharePercent`` (100, default 100, 1-100 step 1) is the
share and ``memory`` has a request policy of default 0, minimum 0: a share takes only the memory
it asks for (``capacity.requests.memory``) instead of the whole card. Capacity keys are
unqualified (``memory``, ``sharePercent``) because claims name them verbatim in
``capacity.requests`` and the scheduler matches the key exactly; unqualified names belong to the
driver's domain, so CEL reads ``device.capacity["gpu.deckhouse.io"].memory`` either way.

Order is the scheduler's first-fit order (it walks devices in slice order), so it is our packing
policy for the claims the scheduler allocates: the MIG offers in the order
:mod:`.offer_order` holds for the card's model (searched over seeded workloads, see
docs/allocator.md "The publication order"), then the shared offers, the Physical offer last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubernetes.client import (
    V1CapacityRequestPolicy,
    V1CapacityRequestPolicyRange,
    V1Counter,
    V1CounterSet,
    V1Device,
    V1DeviceCapacity,
    V1DeviceCounterConsumption,
    V1DeviceTaint,
)

from api.gpu.v1alpha1 import DeviceType, SharingStrategy
from pkg.dra.model.attributes import (
    PCI_BUS_ID,
    AttributeValue,
    card_identity,
    key,
    mib_quantity,
    to_attribute,
)
from pkg.dra.model.card import Card, MigProfileSpec, PartitionMode, Placement, VgpuTypeSpec
from pkg.dra.model.limits import (
    MAX_DEVICES_ADVANCED,
    SliceLimitError,
    validate_counter_set,
    validate_device,
)
from pkg.dra.model.offer_order import MigKey, mig_position
from pkg.dra.model.partition_offers import PartitionCounters, partition_counters
from pkg.dra.model.vgpu_offers import (
    vgpu_attributes,
    vgpu_capacity,
    vgpu_device_name,
    vgpu_memory_share_mib,
)

SHARED_SUFFIX = {SharingStrategy.TIME_SLICING: "ts", SharingStrategy.MPS: "mps"}


@dataclass(frozen=True)
class Offer:
    """One published device and what it stands for (``profile``/``placement`` only for MIG,
    ``partition``/``partition_index`` only for a partition of a card-wide mode, ``vgpu`` only for a
    vGPU)."""

    device: V1Device
    device_type: DeviceType
    sharing: SharingStrategy | None = None
    profile: MigProfileSpec | None = None
    placement: Placement | None = None
    vgpu: VgpuTypeSpec | None = None
    partition: PartitionMode | None = None
    partition_index: int | None = None

    @property
    def name(self) -> str:
        return self.device.name

    @property
    def label(self) -> str:
        """The ``profile`` label of the offers metric: the MIG profile, else the sharing strategy."""
        if self.profile is not None:
            return self.profile.name
        if self.vgpu is not None:
            return self.vgpu.name
        if self.partition is not None:
            return self.partition.name
        return (self.sharing or SharingStrategy.EXCLUSIVE).value


@dataclass(frozen=True)
class CardOffers:
    """A card's counter set and its offers, in publication order."""

    card: Card
    counter_set: V1CounterSet
    offers: tuple[Offer, ...]


def build_offers(card: Card, *, order: Callable[[Card], MigKey] = mig_position) -> CardOffers:
    """Every offer of ``card``; raises :class:`SliceLimitError` if one would break an API limit.

    ``order`` gives the sort key of the card's MIG offers; only the packing benchmark passes
    another than the published one, to measure the orders side by side.
    """
    partitions = partition_counters(card)
    counters = _card_counters(card) | (partitions.counters() if partitions else {})
    counter_set = V1CounterSet(name=card.base_name, counters=_as_counters(counters))
    validate_counter_set(counter_set)
    identity = card_identity(card)
    if card.vgpu_mode:  # no CUDA on the host: vGPUs and passthrough only (vgpu_offers)
        mig, parts, shared = _vgpu_offers(card, identity), [], []
    else:
        mig = _mig_offers(card, identity, order(card)) if card.mig_allowed else []
        parts = _partition_offers(card, identity, partitions) if partitions else []
        shared = [_shared_offer(card, identity, counters, s) for s in SHARED_SUFFIX if s in card.sharing]
    exclusive: dict[str, AttributeValue] = {
        key("deviceType"): DeviceType.PHYSICAL.value,
        key("sharingStrategy"): SharingStrategy.EXCLUSIVE.value,
        PCI_BUS_ID: card.pci_address,
    }
    physical = Offer(
        _device(
            card.base_name,
            attrs=identity | exclusive,
            capacity={"memory": V1DeviceCapacity(value=mib_quantity(card.memory_mib))},
            counter_set=card.base_name,
            uses=counters,
        ),
        DeviceType.PHYSICAL,
        SharingStrategy.EXCLUSIVE,
    )
    offers = (*mig, *parts, *shared, physical)
    if len(offers) > MAX_DEVICES_ADVANCED:  # one card's offers never span slices
        raise SliceLimitError(
            f"card {card.pci_address}", f"has {len(offers)} offers, over a slice's {MAX_DEVICES_ADVANCED}"
        )
    names = [o.name for o in offers]
    if len(set(names)) != len(names):
        raise SliceLimitError(f"card {card.pci_address}", "two offers share a device name")
    for offer in offers:
        validate_device(offer.device)
        # A device consuming a counter its set lacks makes the scheduler reject the whole pool.
        for use in offer.device.consumes_counters or []:
            if missing := sorted(set(use.counters) - set(counters)):
                raise SliceLimitError(
                    f"device {offer.name}", f"consumes {missing}, absent from its counter set"
                )
    return CardOffers(card, counter_set, offers)


def with_taints(offers: CardOffers, taints: Sequence[V1DeviceTaint]) -> CardOffers:
    """``offers`` with ``taints`` on every device of the card (the same offers when none).

    A taint belongs to the card, not to one offer: whichever offer a claim got, the hardware under
    it is the card's. Taints count toward the 64-device limit of a slice (:mod:`.limits`), which
    the packing already keeps since every offer consumes counters.
    """
    if not taints:
        return offers
    tainted = tuple(
        dataclasses.replace(o, device=o.device.model_copy(update={"taints": list(taints)}))
        for o in offers.offers
    )
    for offer in tainted:
        validate_device(offer.device)
    return dataclasses.replace(offers, offers=tainted)


def _card_counters(card: Card) -> dict[str, str]:
    counters = {"memory": mib_quantity(card.memory_mib)}
    counters |= {f"memory-slice-{i}": "1" for i in range(card.memory_slices)}
    return counters | {name: str(n) for name, n in card.total_engines.counters().items()}


def _mig_offers(card: Card, identity: dict[str, AttributeValue], position: MigKey) -> list[Offer]:
    offers = []
    pairs = ((p, pl) for p in card.mig_profiles for pl in p.placements)
    for profile, placement in sorted(pairs, key=position):
        uses = {"memory": mib_quantity(profile.memory_mib)}
        uses |= {f"memory-slice-{i}": "1" for i in placement.slices}
        uses |= {name: str(n) for name, n in profile.engines.counters().items()}
        attrs = identity | {
            key("deviceType"): DeviceType.MIG.value,
            key("migProfile"): profile.name,
            key("profileID"): profile.profile_id,
            key("placementStart"): placement.start,
            key("placementSize"): placement.size,
        }
        device = _device(
            f"{card.base_name}-mig-{profile.profile_id}-{placement.start}",
            attrs=attrs,
            capacity={"memory": V1DeviceCapacity(value=mib_quantity(profile.memory_mib))},
            counter_set=card.base_name,
            uses=uses,
        )
        offers.append(Offer(device, DeviceType.MIG, profile=profile, placement=placement))
    return offers


def _vgpu_offers(card: Card, identity: dict[str, AttributeValue]) -> list[Offer]:
    offers = []
    for spec in card.vgpu_types:
        uses = {"memory": mib_quantity(vgpu_memory_share_mib(card, spec))}
        for instance in range(spec.max_instances):
            device = _device(
                vgpu_device_name(card, spec, instance),
                attrs=identity | vgpu_attributes(spec),
                capacity=vgpu_capacity(spec),
                counter_set=card.base_name,
                uses=uses,
            )
            offers.append(Offer(device, DeviceType.VGPU, SharingStrategy.EXCLUSIVE, vgpu=spec))
    return offers


def _partition_offers(
    card: Card, identity: dict[str, AttributeValue], counters: PartitionCounters
) -> list[Offer]:
    """Every partition of every mode, smallest partitions first (the scheduler's first fit then
    fills a card already cut small before it cuts another)."""
    offers = []
    for weights in sorted(counters.weights, key=lambda w: -w.mode.count):
        mode = weights.mode
        for index in range(mode.count):
            uses = {"memory": mib_quantity(mode.memory_mib)} | counters.uses(weights, index)
            attrs = identity | {
                key("deviceType"): DeviceType.PARTITION.value,
                key("sharingStrategy"): SharingStrategy.EXCLUSIVE.value,  # a GPUClass selects on it
                key("partitionMode"): mode.name,
                key("partitionCount"): mode.count,
                key("partitionIndex"): index,
            }
            device = _device(
                f"{card.base_name}-{mode.name}-{index}",
                attrs=attrs,
                capacity={"memory": V1DeviceCapacity(value=mib_quantity(mode.memory_mib))},
                counter_set=card.base_name,
                uses=uses,
            )
            offers.append(Offer(device, DeviceType.PARTITION, partition=mode, partition_index=index))
    return offers


def _shared_offer(
    card: Card,
    identity: dict[str, AttributeValue],
    everything: dict[str, str],
    strategy: SharingStrategy,
) -> Offer:
    memory = V1DeviceCapacity(
        value=mib_quantity(card.memory_mib),
        request_policy=V1CapacityRequestPolicy(
            default="0", valid_range=V1CapacityRequestPolicyRange(min="0")
        ),
    )
    share = V1DeviceCapacity(
        value="100",
        request_policy=V1CapacityRequestPolicy(
            default="100", valid_range=V1CapacityRequestPolicyRange(min="1", max="100", step="1")
        ),
    )
    attrs = identity | {key("deviceType"): DeviceType.PHYSICAL.value, key("sharingStrategy"): strategy.value}
    device = _device(
        f"{card.base_name}-{SHARED_SUFFIX[strategy]}",
        attrs=attrs,
        capacity={"memory": memory, "sharePercent": share},
        counter_set=card.base_name,
        uses=everything,
        shared=True,
    )
    return Offer(device, DeviceType.PHYSICAL, strategy)


def _device(
    name: str,
    *,
    attrs: dict[str, AttributeValue],
    capacity: dict[str, V1DeviceCapacity],
    counter_set: str,
    uses: dict[str, str],
    shared: bool = False,
) -> V1Device:
    return V1Device(
        name=name,
        attributes={k: to_attribute(v) for k, v in sorted(attrs.items())},
        capacity=capacity,
        consumes_counters=[V1DeviceCounterConsumption(counter_set=counter_set, counters=_as_counters(uses))],
        allow_multiple_allocations=True if shared else None,
    )


def _as_counters(values: dict[str, str]) -> dict[str, V1Counter]:
    return {name: V1Counter(value=value) for name, value in values.items()}
