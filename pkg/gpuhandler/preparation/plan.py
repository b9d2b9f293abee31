"""What a claim's allocation asks of this node: which of our offers, for which requests, configured how.

Everything is read from the allocation and from the published offer, never guessed from names:
a result names a device of our pool; the device's attributes in this node's ResourceSlices say
what it is (``deviceType``, ``sharingStrategy``, the card's ``pciAddress``, for MIG the
``profileID`` and placement, for a partition of a card-wide mode ``partitionMode``,
``partitionCount`` and ``partitionIndex``); the allocation's opaque configs for our driver (from the class,
then the claim, the later winning) say how it is configured. Anything that does not fit — a
result for another node's pool, a device this node does not publish, an attribute missing or of
the wrong kind, a config that is not a valid :class:`~api.gpu.v1alpha1.GpuConfig` — is a
:class:`PlanError` that names the claim, so the Prepare fails with a reason a person can act on.

A share of a card (an offer with ``sharingStrategy`` TimeSlicing or MPS) is planned with what the
scheduler consumed for it (``consumedCapacity``): ``sharePercent``, and ``memory`` when the claim
asked for memory. MPS enforces both, so a share's memory limit is the memory it consumed or,
when it asked for none, its ``sharePercent`` of the card's memory. A config whose
``sharing.strategy`` is not the offer's is refused: it was written for other devices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.client import ResourceV1ResourceClaim, V1Device, V1DeviceRequestAllocationResult, V1ObjectMeta

from api.gpu.v1alpha1 import (
    DeviceType,
    GpuConfig,
    GpuConfigError,
    SharingStrategy,
    TimeSlicingInterval,
    parse_gpu_config,
)
from pkg.domain.names import DOMAIN, DRIVER
from pkg.dra.allocator.quantity import QuantityError, parse_quantity

SKIP_PREPARE = "NodePrepareResources"  # a result's skipNodeOperations entry: not ours to prepare
SHARE_PERCENT = "sharePercent"
MEMORY = "memory"
MIB = 2**20

OfferLookup = Callable[[str, str], V1Device | None]

# What the hardware can have, checked before anything is sized by a slice's numbers: a card has at
# most 8 MIG slots today (64 leaves room for any successor); profile IDs are small; no card has a
# pebibyte of memory, and no quantity we plan with is larger.
MAX_MIG_SLOTS: Final = 64
MAX_PROFILE_ID: Final = 1 << 16
MAX_QUANTITY: Final = 1 << 50
_MDEV_TYPE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MODE: Final = re.compile(r"[a-z][a-z0-9]{0,15}")  # a partition mode's name (spx, cpx)
_PCI_ADDRESS: Final = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


class PlanError(ValueError):
    """The allocation cannot be prepared here; the message names the claim."""


@dataclass(frozen=True)
class MigPlacement:
    profile_id: int
    start: int
    size: int


@dataclass(frozen=True)
class PartitionPlacement:
    """Partition ``index`` of the card-wide mode ``mode`` (``count`` partitions)."""

    mode: str
    count: int
    index: int


@dataclass(frozen=True)
class PlannedShare:
    """A TimeSlicing or MPS share of a whole card and what it was given."""

    strategy: SharingStrategy
    share_percent: int
    memory_mib: int  # what MPS lets it pin: the memory it consumed, else its percent of the card's;
    # for time-slicing only what it consumed (nothing enforces it)
    interval: TimeSlicingInterval = TimeSlicingInterval.DEFAULT  # TimeSlicing only


@dataclass(frozen=True)
class VfioFunction:
    address: str
    driver: str | None  # the driver it had before Prepare; None when it was unbound


@dataclass(frozen=True)
class VfioPlan:
    """The card's IOMMU group and every function in it that goes to ``vfio-pci``, card first."""

    iommu_group: str
    functions: tuple[VfioFunction, ...]


@dataclass(frozen=True)
class VgpuPlan:
    """A vGPU to create: the offer's mdev type and the UUID chosen for it (:mod:`.vgpu_plan`;
    empty until then)."""

    mdev_type: str
    mdev_uuid: str = ""


@dataclass(frozen=True)
class PlannedDevice:
    """One device of the claim to prepare on this node, and what it stands for."""

    request: str
    pool: str
    device: str
    card: str  # the physical card's PCI address
    device_type: DeviceType
    sharing: SharingStrategy
    mig: MigPlacement | None = None
    partition: PartitionPlacement | None = None
    share_id: str | None = None
    share: PlannedShare | None = None
    config: GpuConfig | None = None
    vfio: VfioPlan | None = None  # passthrough asked for and allowed (:mod:`vfio`)
    vgpu: VgpuPlan | None = None  # a vGPU offer (deviceType VGPU)


@dataclass(frozen=True)
class ClaimPlan:
    namespace: str
    name: str
    uid: str
    devices: tuple[PlannedDevice, ...]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def plan_claim(claim: ResourceV1ResourceClaim, *, pool: str, offers: OfferLookup) -> ClaimPlan:
    """The devices of ``claim`` this node must prepare (results of our driver in ``pool``)."""
    meta = claim.metadata or V1ObjectMeta()
    label = f"claim {meta.namespace}/{meta.name}"
    allocation = claim.status.allocation if claim.status else None
    if allocation is None or allocation.devices is None:
        raise PlanError(f"{label} is not allocated")
    planned = []
    for result in allocation.devices.results or []:
        if result.driver != DRIVER or SKIP_PREPARE in (result.skip_node_operations or []):
            continue
        if result.pool != pool:
            raise PlanError(
                f"{label}: device {result.device} is allocated from pool {result.pool}, not {pool}"
            )
        device = offers(result.pool, result.device)
        if device is None:
            raise PlanError(f"{label}: device {result.device} is not published in pool {pool}")
        config = _config_for(result, allocation.devices.config or [], label)
        planned.append(_planned(result, device, config, label))
    if not planned:
        raise PlanError(f"{label} has no device of driver {DRIVER} to prepare")
    return ClaimPlan(
        namespace=str(meta.namespace), name=str(meta.name), uid=str(meta.uid), devices=tuple(planned)
    )


def _planned(
    result: V1DeviceRequestAllocationResult, device: V1Device, config: GpuConfig | None, label: str
) -> PlannedDevice:
    where = f"{label}: device {result.device}"
    device_type = _enum(DeviceType, _attribute(device, "deviceType", str, where), "deviceType", where)
    sharing = _enum(
        SharingStrategy,
        _attribute(device, "sharingStrategy", str, where, default="Exclusive"),
        "sharingStrategy",
        where,
    )
    mig = None
    if device_type is DeviceType.MIG:
        profile_id = _bounded(
            _attribute(device, "profileID", int, where), 0, MAX_PROFILE_ID, "profileID", where
        )
        start = _bounded(
            _attribute(device, "placementStart", int, where), 0, MAX_MIG_SLOTS - 1, "placementStart", where
        )
        size = _bounded(
            _attribute(device, "placementSize", int, where), 1, MAX_MIG_SLOTS, "placementSize", where
        )
        if start + size > MAX_MIG_SLOTS:
            raise PlanError(f"{where} has placement {start}+{size}, beyond a card's {MAX_MIG_SLOTS} slots")
        mig = MigPlacement(profile_id=profile_id, start=start, size=size)
    vgpu = None
    if device_type is DeviceType.VGPU:
        mdev_type = _attribute(device, "mdevType", str, where)
        if not _MDEV_TYPE.fullmatch(mdev_type):
            raise PlanError(f"{where} has mdevType {mdev_type[:80]!r}, not a type ID of mdev_supported_types")
        vgpu = VgpuPlan(mdev_type=mdev_type)
    partition = _partition(device, where) if device_type is DeviceType.PARTITION else None
    wanted = config.sharing.strategy if config is not None and config.sharing is not None else None
    if wanted is not None and wanted is not sharing:
        raise PlanError(
            f"{where} is a {sharing.value} device but its config asks for sharing strategy {wanted.value}"
        )
    share = None
    if sharing is not SharingStrategy.EXCLUSIVE:
        share = _share(result, device, sharing, config, where)
    return PlannedDevice(
        request=str(result.request),
        pool=str(result.pool),
        device=str(result.device),
        card=_pci_address(_attribute(device, "pciAddress", str, where), where),
        device_type=device_type,
        sharing=sharing,
        mig=mig,
        partition=partition,
        share_id=result.share_id,
        share=share,
        config=config,
        vgpu=vgpu,
    )


def _partition(device: V1Device, where: str) -> PartitionPlacement:
    mode = _attribute(device, "partitionMode", str, where)
    if not _MODE.fullmatch(mode):
        raise PlanError(f"{where} has partitionMode {mode[:80]!r}, not a mode name (cpx)")
    count = _bounded(
        _attribute(device, "partitionCount", int, where), 2, MAX_MIG_SLOTS, "partitionCount", where
    )
    index = _bounded(_attribute(device, "partitionIndex", int, where), 0, count - 1, "partitionIndex", where)
    return PartitionPlacement(mode=mode, count=count, index=index)


def _share(
    result: V1DeviceRequestAllocationResult,
    device: V1Device,
    strategy: SharingStrategy,
    config: GpuConfig | None,
    where: str,
) -> PlannedShare:
    settings = config.sharing if config is not None else None
    consumed = result.consumed_capacity or {}
    if SHARE_PERCENT in consumed:
        percent = _quantity(consumed[SHARE_PERCENT], f"consumed {SHARE_PERCENT}", where)
    elif settings is not None and settings.mps is not None and settings.mps.default_active_thread_percentage:
        percent = settings.mps.default_active_thread_percentage
    else:
        percent = 100
    if not 1 <= percent <= 100:
        raise PlanError(f"{where} has consumed {SHARE_PERCENT} {percent}, not between 1 and 100")
    asked = _quantity(consumed[MEMORY], f"consumed {MEMORY}", where) if MEMORY in consumed else 0
    memory_bytes = asked
    if strategy is SharingStrategy.MPS and asked == 0:  # MPS needs a limit; time-slicing enforces none
        card_memory = (device.capacity or {}).get(MEMORY)
        if card_memory is None or card_memory.value is None:
            raise PlanError(f"{where} is an MPS share but its offer has no {MEMORY} capacity")
        memory_bytes = _quantity(card_memory.value, f"{MEMORY} capacity", where) * percent // 100
    interval = TimeSlicingInterval.DEFAULT
    if settings is not None and settings.time_slicing is not None:
        interval = settings.time_slicing.interval
    return PlannedShare(
        strategy=strategy, share_percent=percent, memory_mib=memory_bytes // MIB, interval=interval
    )


def _quantity(text: str, what: str, where: str) -> int:
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


def _bounded(value: int, low: int, high: int, name: str, where: str) -> int:
    if not low <= value <= high:
        raise PlanError(f"{where} has {name} {value}, not between {low} and {high}")
    return value


def _pci_address(value: str, where: str) -> str:
    """The card's PCI address, which names folders and sysfs paths: only ``dddd:bb:dd.f`` passes."""
    if not _PCI_ADDRESS.fullmatch(value):
        raise PlanError(f"{where} has pciAddress {value[:80]!r}, not a PCI address (0000:3b:00.0)")
    return value


def _attribute(device: V1Device, name: str, kind: type, where: str, default: Any = None) -> Any:
    attribute = (device.attributes or {}).get(f"{DOMAIN}/{name}")
    value = None
    if attribute is not None:
        value = attribute.int if kind is int else attribute.string
    if value is None:
        if default is not None:
            return default
        raise PlanError(f"{where} has no {kind.__name__} attribute {DOMAIN}/{name}")
    return value


def _enum(kind: Any, value: str, name: str, where: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise PlanError(f"{where} has {name} {value!r}, not one of {[k.value for k in kind]}") from None


def _config_for(
    result: V1DeviceRequestAllocationResult, configs: Sequence[Any], label: str
) -> GpuConfig | None:
    """The effective GpuConfig of a result: class configs first, then claim configs; the last wins."""
    request = str(result.request)
    parent = request.split("/", 1)[0]  # a subrequest "gpu/mig" is configured by "gpu" too
    best: tuple[tuple[int, int], Any] | None = None
    for position, config in enumerate(configs):
        opaque = config.opaque
        if opaque is None or opaque.driver != DRIVER:
            continue
        requests = config.requests or []
        if requests and request not in requests and parent not in requests:
            continue
        rank = (0 if config.source == "FromClass" else 1, position)
        if best is None or rank > best[0]:
            best = (rank, opaque.parameters)
    if best is None:
        return None
    try:
        return parse_gpu_config(best[1])
    except GpuConfigError as exc:
        raise PlanError(f"{label}: the {DRIVER} config for request {request} is invalid: {exc}") from None
