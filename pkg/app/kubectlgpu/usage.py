"""The usage gpu-handler reports in a claim's ``status.devices[]``, read defensively.

The data contract is :class:`api.gpu.v1alpha1.devicestatus.DeviceStatusData`: one entry per
prepared device of our driver (keyed by driver, pool, device and ``shareID``) whose ``data`` holds
the device's identity and, once sampled, its ``usage``. A gpu-handler of an earlier release wrote
the usage alone, as a :class:`~api.gpu.v1alpha1.deviceusage.DeviceUsage`; that shape is still read
(``kind`` tells them apart), so ``top`` works while the nodes are upgraded. Both are shown as one
``DeviceUsage``. The status is writable by any driver and by whoever may update the claim's
status, so every entry is parsed on its own: a malformed one becomes a :class:`DeviceSample` with
``problem`` set, and the other entries and claims are unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from api.gpu.v1alpha1.devicestatus import KIND as DEVICE_STATUS_DATA_KIND
from api.gpu.v1alpha1.devicestatus import DeviceStatusData
from api.gpu.v1alpha1.deviceusage import DeviceUsage
from pkg.domain.names import DRIVER


@dataclass(frozen=True)
class DeviceRef:
    """One allocated device as the claim's status names it."""

    pool: str
    device: str
    share_id: str | None = None


@dataclass(frozen=True)
class DeviceSample:
    """What a claim's status says about one of our devices: the usage, or why it is unusable."""

    ref: DeviceRef
    usage: DeviceUsage | None = None
    problem: str | None = None


def device_samples(claim: dict[str, Any]) -> list[DeviceSample]:
    """Every entry of ``status.devices[]`` of our driver, parsed; entries of other drivers are
    skipped, an entry without ``data`` yields neither usage nor problem (not sampled yet)."""
    entries = ((claim.get("status") or {}).get("devices")) or []
    if not isinstance(entries, list):
        return [DeviceSample(DeviceRef("", ""), problem="status.devices is not a list")]
    samples = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("driver") != DRIVER:
            continue
        ref = DeviceRef(str(entry.get("pool") or ""), str(entry.get("device") or ""), entry.get("shareID"))
        samples.append(_sample(ref, entry.get("data")))
    return samples


def _sample(ref: DeviceRef, data: Any) -> DeviceSample:
    if data is None:
        return DeviceSample(ref)
    if not isinstance(data, dict):
        return DeviceSample(
            ref, problem=f"data is a {type(data).__name__}, not a {DEVICE_STATUS_DATA_KIND} object"
        )
    current = data.get("kind") == DEVICE_STATUS_DATA_KIND
    try:
        if not current:
            return DeviceSample(ref, usage=DeviceUsage.model_validate(data))
        return DeviceSample(ref, usage=_usage_of(DeviceStatusData.model_validate(data)))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "data"
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        kind = DEVICE_STATUS_DATA_KIND if current else "DeviceUsage"
        return DeviceSample(ref, problem=f"malformed {kind}: {where}: {first['msg']}{more}")


def _usage_of(data: DeviceStatusData) -> DeviceUsage | None:
    """The usage of a device's data in the shape ``top`` shows; None until it was sampled."""
    usage = data.usage
    if usage is None:
        return None
    return DeviceUsage(
        sampled_at=usage.sampled_at,
        physical_gpu=data.physical_gpu or "",
        uuid=data.uuid or "",
        memory_used_bytes=usage.memory_used_bytes,
        sm_utilization_percent=usage.sm_utilization_percent,
        containers=usage.containers,
        containers_omitted=usage.containers_omitted,
    )
