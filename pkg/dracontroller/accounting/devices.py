"""What a claim holds: one :class:`HeldDevice` per allocated device of our driver, with the facts
the metrics and events name (class, device type, node, PhysicalGPU, card UUID, Pods).

Pure functions over a claim and a :class:`DeviceIndex` built from the slice and PhysicalGPU
caches, so they are unit-tested without a cluster.

When an allocation was made comes from the API server, not from when we saw it, because after a
restart the claims allocated while nobody watched must still be charged from their real start:
``status.allocation.allocationTimestamp`` when the allocator set it (the kube-scheduler does under
``DRADeviceBindingConditions``), else the ``time`` of the managedFields entry that owns
``status.allocation`` (the allocator's status write). Both have one-second resolution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta, V1ResourceSlice

from api.gpu.v1alpha1 import PhysicalGPU

SCHEDULER = "kube-scheduler"


@dataclass(frozen=True, kw_only=True)
class DeviceFacts:
    """A published device of our driver, as its offer and its card's PhysicalGPU describe it."""

    device_type: str = ""
    node: str = ""
    physical_gpu: str = ""
    uuid: str = ""  # the card's UUID (also on MIG offers: a MIG instance has none until prepared)
    pci_address: str = ""
    profile: str = ""  # MIG profile, else the sharing strategy


DeviceIndex = Mapping[tuple[str, str], DeviceFacts]
"""(pool, device) -> facts."""


@dataclass(frozen=True, kw_only=True)
class HeldDevice:
    """One device of one claim's allocation; ``key`` is unique per allocation of a device."""

    key: str
    claim_uid: str
    namespace: str
    claim: str
    request: str
    device: str
    device_class: str
    facts: DeviceFacts
    pods: tuple[str, ...]
    allocated_by: str


def device_index(
    *, slices: Iterable[V1ResourceSlice], physical_gpus: Iterable[PhysicalGPU], driver: str
) -> dict[tuple[str, str], DeviceFacts]:
    """Facts of every device of ``driver`` in ``slices``; the PhysicalGPU is found by node and PCI address."""
    cards = {
        (gpu.status.node_info.node_name, gpu.status.pci_info.address): gpu.metadata.name or ""
        for gpu in physical_gpus
        if gpu.status is not None and gpu.status.node_info is not None and gpu.status.pci_info is not None
    }
    index: dict[tuple[str, str], DeviceFacts] = {}
    for rs in slices:
        spec = rs.spec
        if spec is None or spec.driver != driver:
            continue
        for device in spec.devices or ():
            attributes = device.attributes or {}
            node = device.node_name or spec.node_name or ""
            pci = _string(attributes, driver, "pciAddress")
            index[(spec.pool.name, device.name)] = DeviceFacts(
                device_type=_string(attributes, driver, "deviceType"),
                node=node,
                physical_gpu=cards.get((node, pci), ""),
                uuid=_string(attributes, driver, "uuid"),
                pci_address=pci,
                profile=_string(attributes, driver, "migProfile")
                or _string(attributes, driver, "sharingStrategy"),
            )
    return index


def held_devices(
    claim: ResourceV1ResourceClaim, devices: DeviceIndex, *, driver: str, allocated_by_annotation: str
) -> list[HeldDevice]:
    """The devices of ``driver`` that ``claim`` holds now (none if it is not allocated)."""
    status = claim.status
    allocation = status.allocation if status is not None else None
    if status is None or allocation is None or allocation.devices is None:
        return []
    meta = claim.metadata or V1ObjectMeta()
    uid = meta.uid or f"{meta.namespace}/{meta.name}"
    classes = request_classes(claim)
    pods = tuple(
        sorted(ref.name for ref in (status.reserved_for or ()) if ref.resource == "pods" and ref.name)
    )
    by = (meta.annotations or {}).get(allocated_by_annotation) or SCHEDULER
    held = []
    for result in allocation.devices.results or ():
        if result.driver != driver:
            continue
        share = f"/{result.share_id}" if result.share_id else ""
        held.append(
            HeldDevice(
                key=f"{uid}/{result.request}/{result.pool}/{result.device}{share}",
                claim_uid=uid,
                namespace=meta.namespace or "",
                claim=meta.name or "",
                request=result.request,
                device=result.device,
                device_class=classes.get(result.request, ""),
                facts=devices.get((result.pool, result.device), DeviceFacts()),
                pods=pods,
                allocated_by=by,
            )
        )
    return held


def request_classes(claim: Any) -> dict[str, str]:
    """Result request name (``req`` or ``req/sub``) -> device class name."""
    devices = claim.spec.devices if claim.spec is not None else None
    classes: dict[str, str] = {}
    for request in (devices.requests if devices is not None else None) or ():
        if request.exactly is not None:
            classes[request.name] = request.exactly.device_class_name or ""
        for sub in request.first_available or ():
            classes[f"{request.name}/{sub.name}"] = sub.device_class_name or ""
    return classes


def allocated_at(claim: ResourceV1ResourceClaim) -> float | None:
    """When the claim's allocation was written, by the API server's clock (second resolution)."""
    allocation = claim.status.allocation if claim.status is not None else None
    if allocation is None:
        return None
    if allocation.allocation_timestamp is not None:
        return _epoch(allocation.allocation_timestamp)
    owners = [
        entry.time
        for entry in (claim.metadata or V1ObjectMeta()).managed_fields or ()
        if entry.subresource == "status"
        and entry.time is not None
        and "f:allocation" in ((entry.fields_v1 or {}).get("f:status") or {})
    ]
    return _epoch(max(owners)) if owners else None


def last_status_write(claim: ResourceV1ResourceClaim) -> float | None:
    """The time of the claim's latest status write: for a claim whose allocation is gone, its release."""
    times = [
        entry.time
        for entry in (claim.metadata or V1ObjectMeta()).managed_fields or ()
        if entry.subresource == "status" and entry.time is not None
    ]
    return _epoch(max(times)) if times else None


def start_estimate(*, written: float | None, seen: float) -> float:
    """When the allocation started, from the API's whole-second ``written`` and when we ``seen`` it.

    The true start lies in ``[written, written + 1)`` and not after ``seen``: seen within that
    second (a live watch), ``seen`` is the best estimate; seen later (we were not running), the
    middle of the second halves the worst error. No timestamp: ``seen``.
    """
    if written is None or seen < written:
        return seen
    return seen if seen < written + 1.0 else written + 0.5


def _string(attributes: Mapping[str, Any], driver: str, name: str) -> str:
    attr = attributes.get(f"{driver}/{name}") or attributes.get(name)
    return (attr.string if attr is not None else None) or ""


def _epoch(value: datetime | str) -> float:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.timestamp()


__all__ = [
    "SCHEDULER",
    "DeviceFacts",
    "DeviceIndex",
    "HeldDevice",
    "allocated_at",
    "device_index",
    "held_devices",
    "last_status_write",
    "request_classes",
    "start_estimate",
]
