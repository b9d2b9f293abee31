"""The attribution's usage, thinned, into the status book: what ``kubectl gpu top`` reads.

Why the claim: its namespace's users read it with the rights they have (``kubectl gpu top``), and
it shows only that claim's Pods (api/gpu/v1alpha1/devicestatus.py). Cost is bounded: a claim's
usage is handed to the book (which then writes the claim) when what its devices show changed
materially (the set of containers, GPU memory by more than :data:`MEMORY_STEP_BYTES` or a tenth, SM
share by :data:`SM_STEP_PERCENT` points) and no sooner than ``min_interval`` after the last time,
or when that is ``refresh`` old, so ``sampledAt`` never grows stale by more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from api.gpu.v1alpha1 import DEVICE_USAGE_MAX_CONTAINERS as MAX_CONTAINERS
from api.gpu.v1alpha1 import ContainerUsage, UsageFigures
from pkg.gpuhandler.attribution.sampler import ATTRIBUTED, PreparedDevice, UsageSample
from pkg.gpuhandler.preparation.services import DeviceKey

MEMORY_STEP_BYTES: Final = 64 << 20
SM_STEP_PERCENT: Final = 5


@dataclass
class _Fed:
    usages: dict[DeviceKey, UsageFigures]
    at: float


def device_usage(sample: UsageSample, device: PreparedDevice) -> UsageFigures:
    """What the device's rows say, as the claim's reader should see it: its own Pods only."""
    rows = sorted(
        (r for r in sample.rows_of(device) if r.key.attribution == ATTRIBUTED),
        key=lambda r: (-(r.memory_bytes or 0), r.key.pod, r.key.container),
    )
    sampled = [r.sm_percent for r in rows if r.sm_percent is not None]
    return UsageFigures(
        sampled_at=sample.taken_at,
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


def changed_materially(old: UsageFigures, new: UsageFigures) -> bool:
    def containers(usage: UsageFigures) -> set[tuple[str, str, str]]:
        return {(c.namespace, c.pod, c.container) for c in usage.containers}

    memory_step = max(MEMORY_STEP_BYTES, old.memory_used_bytes // 10)
    return (
        containers(old) != containers(new)
        or abs(new.memory_used_bytes - old.memory_used_bytes) > memory_step
        or abs((new.sm_utilization_percent or 0) - (old.sm_utilization_percent or 0)) >= SM_STEP_PERCENT
        or (old.sm_utilization_percent is None) != (new.sm_utilization_percent is None)
    )


class UsageSink(Protocol):
    """Where the feed hands a claim's usage: the status book (``DeviceStatusBook.usage``)."""

    def usage(self, uid: str, usages: dict[DeviceKey, UsageFigures]) -> None: ...


class UsageFeed:
    """Hands each sample's usage to the book, within the limits above."""

    def __init__(
        self,
        *,
        book: UsageSink,
        clock: Callable[[], float],
        min_interval: float = 30.0,
        refresh: float = 300.0,
    ) -> None:
        self._book = book
        self._clock = clock
        self._min_interval = min_interval
        self._refresh = refresh
        self._fed: dict[str, _Fed] = {}

    def write(self, sample: UsageSample) -> None:
        by_claim: dict[str, dict[DeviceKey, UsageFigures]] = {}
        for device in sample.devices:
            key = DeviceKey(device.pool, device.device, device.share_id)
            by_claim.setdefault(device.claim_uid, {})[key] = device_usage(sample, device)
        self._fed = {uid: fed for uid, fed in self._fed.items() if uid in by_claim}  # the prepared only
        now = self._clock()
        for uid, usages in by_claim.items():
            if self._due(self._fed.get(uid), usages, now):
                self._book.usage(uid, usages)
                self._fed[uid] = _Fed(usages, now)

    def _due(self, fed: _Fed | None, usages: dict[DeviceKey, UsageFigures], now: float) -> bool:
        if fed is None or now - fed.at >= self._refresh:
            return True
        if now - fed.at < self._min_interval:
            return False
        return fed.usages.keys() != usages.keys() or any(
            changed_materially(fed.usages[k], usages[k]) for k in usages
        )
