"""Each prepared device's :class:`~api.gpu.v1alpha1.DeviceUsage` in its claim's ``status.devices``.

Why the claim: its namespace's users read it with the rights they have (``kubectl gpu top``), and
it shows only that claim's Pods (api/gpu/v1alpha1/deviceusage.py). The entry is written by
server-side apply on the status subresource under a field manager of its own
(:data:`FIELD_MANAGER`), so it owns exactly its entries of ``status.devices`` (a map keyed by
driver, pool, device and share ID) and never touches the allocation or another driver's entries;
``metadata.uid`` in the body makes a claim deleted and made again under the same name refuse it.

Cost is bounded: a claim is written when what its devices show changed materially (the set of
containers, GPU memory by more than :data:`MEMORY_STEP_BYTES` or a tenth, SM share by
:data:`SM_STEP_PERCENT` points) and no sooner than ``min_interval`` after its last write, or
when its last write is ``refresh`` old; a failed write is retried with exponential backoff per
claim, up to :data:`MAX_BACKOFF_SECONDS`. A claim the API no longer has (404) or whose name now
belongs to another object (409: the apply is forced, so a conflict can only be the uid in the body)
is not written again while it stays prepared: no retry can succeed, since a uid never comes back,
and backing off would still ask the API server every five minutes for each such claim. Its entry,
like every claim's, is dropped when the claim is no longer prepared; a claim made again under the
same name has a new uid and is written afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from api.gpu.v1alpha1 import DEVICE_USAGE_MAX_CONTAINERS as MAX_CONTAINERS
from api.gpu.v1alpha1 import ContainerUsage, DeviceUsage
from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.errors import ApiError, ConflictError, NotFoundError
from pkg.gpuhandler.attribution.sampler import ATTRIBUTED, PreparedDevice, UsageSample

logger = logging.getLogger(__name__)

FIELD_MANAGER: Final = "gpu-handler-usage"
MEMORY_STEP_BYTES: Final = 64 << 20
SM_STEP_PERCENT: Final = 5
MAX_BACKOFF_SECONDS: Final = 300.0
_FIRST_BACKOFF_SECONDS: Final = 5.0


@dataclass
class _ClaimWrites:
    """What was last written into one claim's status and when, when a failed write may retry, and
    whether the claim is gone from the API (never written again)."""

    written: tuple[DeviceUsage, ...] | None = None
    written_at: float | None = None
    retry_at: float = 0.0
    backoff: float = 0.0
    gone: bool = False


def device_usage(sample: UsageSample, device: PreparedDevice) -> DeviceUsage:
    """What the device's rows say, as the claim's reader should see it: its own Pods only."""
    rows = sorted(
        (r for r in sample.rows_of(device) if r.key.attribution == ATTRIBUTED),
        key=lambda r: (-(r.memory_bytes or 0), r.key.pod, r.key.container),
    )
    sampled = [r.sm_percent for r in rows if r.sm_percent is not None]
    return DeviceUsage(
        sampled_at=sample.taken_at,
        physical_gpu=device.physicalgpu,
        uuid=device.uuid,
        memory_used_bytes=sum(r.memory_bytes or 0 for r in rows),
        sm_utilization_percent=min(100, sum(sampled)) if sampled or not rows else None,
        containers=[
            ContainerUsage(
                namespace=r.key.namespace,
                pod=r.key.pod,
                container=r.key.container,
                processes=r.processes,
                memory_bytes=r.memory_bytes or 0,
                sm_utilization_percent=r.sm_percent,
            )
            for r in rows[:MAX_CONTAINERS]
        ],
        containers_omitted=len(rows) - MAX_CONTAINERS if len(rows) > MAX_CONTAINERS else None,
    )


def changed_materially(old: DeviceUsage, new: DeviceUsage) -> bool:
    def containers(usage: DeviceUsage) -> set[tuple[str, str, str]]:
        return {(c.namespace, c.pod, c.container) for c in usage.containers}

    memory_step = max(MEMORY_STEP_BYTES, old.memory_used_bytes // 10)
    return (
        containers(old) != containers(new)
        or abs(new.memory_used_bytes - old.memory_used_bytes) > memory_step
        or abs((new.sm_utilization_percent or 0) - (old.sm_utilization_percent or 0)) >= SM_STEP_PERCENT
        or (old.sm_utilization_percent is None) != (new.sm_utilization_percent is None)
    )


class ClaimUsageWriter:
    """Writes the sample's usage into the claims, within the limits above."""

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Callable[[], float],
        min_interval: float = 30.0,
        refresh: float = 300.0,
    ) -> None:
        self._client = KubeClient(client.api_client, field_manager=FIELD_MANAGER)
        self._clock = clock
        self._min_interval = min_interval
        self._refresh = refresh
        self._claims: dict[str, _ClaimWrites] = {}

    def write(self, sample: UsageSample) -> None:
        by_claim: dict[str, list[PreparedDevice]] = {}
        for device in sample.devices:
            by_claim.setdefault(device.claim_uid, []).append(device)
        # claims no longer prepared are forgotten
        self._claims = {uid: self._claims.get(uid, _ClaimWrites()) for uid in by_claim}
        now = self._clock()
        for uid, devices in by_claim.items():
            writes = self._claims[uid]
            usages = tuple(device_usage(sample, d) for d in devices)
            if writes.gone or now < writes.retry_at or not self._due(writes, usages, now):
                continue
            try:
                self._apply(devices, usages)
            except (NotFoundError, ConflictError) as exc:
                writes.gone = True
                logger.info(
                    "claim %s/%s (uid %s) is gone; its usage is not written while it stays prepared: %s",
                    devices[0].namespace,
                    devices[0].claim,
                    uid,
                    exc,
                )
                continue
            except (ApiError, OSError) as exc:
                writes.backoff = min(MAX_BACKOFF_SECONDS, max(_FIRST_BACKOFF_SECONDS, writes.backoff * 2))
                writes.retry_at = now + writes.backoff
                logger.warning(
                    "usage of claim %s/%s not written (retry in %.0f s): %s",
                    devices[0].namespace,
                    devices[0].claim,
                    writes.backoff,
                    exc,
                )
                continue
            writes.written, writes.written_at, writes.backoff, writes.retry_at = usages, now, 0.0, 0.0

    def _due(self, writes: _ClaimWrites, usages: tuple[DeviceUsage, ...], now: float) -> bool:
        if writes.written is None or writes.written_at is None:
            return True
        if now - writes.written_at >= self._refresh:
            return True
        if now - writes.written_at < self._min_interval:
            return False
        return len(usages) != len(writes.written) or any(
            changed_materially(old, new) for old, new in zip(writes.written, usages, strict=True)
        )

    def _apply(self, devices: list[PreparedDevice], usages: tuple[DeviceUsage, ...]) -> None:
        first = devices[0]
        entries: list[dict[str, Any]] = []
        for device, usage in zip(devices, usages, strict=True):
            entry: dict[str, Any] = {
                "driver": DRIVER,
                "pool": device.pool,
                "device": device.device,
                "data": usage.to_api_dict(),
            }
            if device.share_id is not None:
                entry["shareID"] = device.share_id
            entries.append(entry)
        body = {
            "metadata": {"name": first.claim, "namespace": first.namespace, "uid": first.claim_uid},
            "status": {"devices": entries},
        }
        self._client.apply(RESOURCE_CLAIM, body, subresource="status")
