"""One attribution pass: the cards' processes joined with containers, Pods and prepared claims.

A process's row is keyed by who it is (namespace, Pod, container), which claim of that Pod holds the
device it runs on, and which device (PhysicalGPU and the card's or MIG device's UUID). Processes of
one container on one device are summed into one row. ``attribution`` says how sure the row is:

* ``pod``: the cgroup led to a Pod of this node;
* ``none``: the process belongs to no Pod we know (a host process, a container outside
  Kubernetes, a Pod already gone) — reported with its device and empty Pod labels, never dropped;
* ``capped``: rows beyond the series cap, folded per device (the cap bounds the metrics'
  cardinality on a node whatever runs there; :data:`DEFAULT_MAX_SERIES`).

Energy: each card's energy counter advances between passes; the increase is shared among the
card's rows by their SM share where the driver samples it, else by GPU memory held, and kept as a
running total per row (a counter that ends when the row does). Energy drawn while no process ran
is the card's, not anyone's, and is not attributed.

Every prepared device gets its totals (zero while idle), so a MIG device has series from the moment
Prepare made it, before anything runs there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Final

from kubernetes.client import V1Pod

from pkg.backends.backend import BackendError
from pkg.backends.usage import CardUsage, ProcessUsage
from pkg.gpuhandler.attribution.pods import PodContainer, PodDirectory
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import mig_record
from pkg.gpuhandler.preparation.kinds.vm.records import for_vm
from pkg.hardware.cgroups import ProcessCgroup

logger = logging.getLogger(__name__)

DEFAULT_MAX_SERIES: Final = 1000
ATTRIBUTED: Final = "pod"
UNATTRIBUTED: Final = "none"
CAPPED: Final = "capped"


@dataclass(frozen=True, kw_only=True)
class UsageKey:
    namespace: str
    pod: str
    container: str
    claim: str
    physicalgpu: str
    uuid: str
    attribution: str


@dataclass(frozen=True, kw_only=True)
class UsageRow:
    """A container's processes on one device (or the folded rest)."""

    key: UsageKey
    processes: int
    memory_bytes: int | None  # None: the driver reported no figure for any of them
    sm_percent: int | None  # None: not sampled on this device (a card in MIG mode)
    energy_joules: float = 0.0  # since the row first appeared


@dataclass(frozen=True, kw_only=True)
class PreparedDevice:
    """A device this node prepared for a claim, and the UUID its processes report."""

    namespace: str
    claim: str
    claim_uid: str
    pool: str
    device: str
    share_id: str | None
    card: str
    physicalgpu: str
    uuid: str


@dataclass(frozen=True, kw_only=True)
class UsageSample:
    """One pass's usage rows and the prepared devices they were matched to: published whole, so a
    scrape and the claims' status read the same pass."""

    taken_at: datetime
    rows: tuple[UsageRow, ...] = ()
    devices: tuple[PreparedDevice, ...] = ()
    folded: int = 0  # rows folded into ``capped`` ones
    failed_cards: tuple[str, ...] = ()

    def rows_of(self, device: PreparedDevice) -> list[UsageRow]:
        return self._rows_by_device.get((device.namespace, device.claim, device.uuid), [])

    @cached_property
    def _rows_by_device(self) -> dict[tuple[str, str, str], list[UsageRow]]:
        index: dict[tuple[str, str, str], list[UsageRow]] = {}
        for row in self.rows:
            index.setdefault((row.key.namespace, row.key.claim, row.key.uuid), []).append(row)
        return index


@dataclass
class _Sum:
    processes: int = 0
    memory: int | None = None
    sm: int | None = None

    def add(self, process: ProcessUsage) -> None:
        self.processes += 1
        if process.memory_bytes is not None:
            self.memory = (self.memory or 0) + process.memory_bytes
        if process.sm_percent is not None:
            self.sm = min(100, (self.sm or 0) + process.sm_percent)

    def merge(self, row: UsageRow) -> None:
        self.processes += row.processes
        if row.memory_bytes is not None:
            self.memory = (self.memory or 0) + row.memory_bytes
        if row.sm_percent is not None:
            self.sm = min(100, (self.sm or 0) + row.sm_percent)


@dataclass
class _EnergyBook:
    """Running energy totals per row key and the cards' last counter readings."""

    last_mj: dict[str, int] = field(default_factory=dict)
    totals: dict[UsageKey, float] = field(default_factory=dict)


class Sampler:
    """Takes :class:`UsageSample`s; each input is a call, so the pass is unit-tested without a node."""

    def __init__(
        self,
        *,
        read_usage: Callable[[str], CardUsage],
        cards: Callable[[], Mapping[str, str]],
        prepared: Callable[[], Iterable[ClaimRecord]],
        pods: Callable[[], Iterable[V1Pod]],
        cgroup: Callable[[int], ProcessCgroup | None],
        now: Callable[[], datetime],
        max_series: int = DEFAULT_MAX_SERIES,
    ) -> None:
        """``cards``: PCI address → PhysicalGPU name of this node's cards the backend reads."""
        self._read_usage = read_usage
        self._cards = cards
        self._prepared = prepared
        self._pods = pods
        self._cgroup = cgroup
        self._now = now
        self._max_series = max_series
        self._energy = _EnergyBook()

    def sample(self) -> UsageSample:
        cards = dict(self._cards())
        usages: list[CardUsage] = []
        failed = []
        for address in sorted(cards):
            try:
                usages.append(self._read_usage(address))
            except BackendError as exc:
                failed.append(address)
                logger.warning("usage of card %s not read: %s", address, exc.message)
        devices = _prepared_devices(self._prepared(), cards, {u.address: u.uuid for u in usages})
        by_key = {(d.namespace, d.claim, d.uuid): d for d in devices}
        directory = PodDirectory(self._pods())
        sums: dict[UsageKey, _Sum] = {}
        for usage in usages:
            for process in usage.processes:
                key = self._key(process, usage, cards[usage.address], directory, by_key)
                sums.setdefault(key, _Sum()).add(process)
        rows = [
            UsageRow(key=key, processes=s.processes, memory_bytes=s.memory, sm_percent=s.sm)
            for key, s in sums.items()
        ]
        rows, folded = _cap(rows, self._max_series)
        rows = self._with_energy(rows, usages, cards)
        return UsageSample(
            taken_at=self._now(),
            rows=tuple(rows),
            devices=tuple(devices),
            folded=folded,
            failed_cards=tuple(failed),
        )

    def _key(
        self,
        process: ProcessUsage,
        usage: CardUsage,
        physicalgpu: str,
        directory: PodDirectory,
        devices: Mapping[tuple[str, str, str], PreparedDevice],
    ) -> UsageKey:
        cgroup = self._cgroup(process.pid)
        owner: PodContainer | None = None
        if cgroup is not None:
            owner = directory.find(container_id=cgroup.container_id, pod_uid=cgroup.pod_uid)
        if owner is None:
            return UsageKey(
                namespace="",
                pod="",
                container="",
                claim="",
                physicalgpu=physicalgpu,
                uuid=process.device_uuid,
                attribution=UNATTRIBUTED,
            )
        claim = next(
            (
                name
                for name in sorted(owner.claims)
                if (owner.namespace, name, process.device_uuid) in devices
            ),
            "",
        )
        return UsageKey(
            namespace=owner.namespace,
            pod=owner.pod,
            container=owner.container,
            claim=claim,
            physicalgpu=physicalgpu,
            uuid=process.device_uuid,
            attribution=ATTRIBUTED,
        )

    def _with_energy(
        self, rows: list[UsageRow], usages: list[CardUsage], cards: Mapping[str, str]
    ) -> list[UsageRow]:
        book = self._energy
        increases: dict[str, float] = {}  # physicalgpu → joules since the last pass
        for usage in usages:
            if usage.energy_mj is None:
                continue
            previous = book.last_mj.get(usage.address)
            book.last_mj[usage.address] = usage.energy_mj
            if previous is not None and usage.energy_mj >= previous:  # after a reset (driver reload): nothing
                increases[cards[usage.address]] = (usage.energy_mj - previous) / 1000
        by_card: dict[str, list[UsageRow]] = {}
        for row in rows:
            by_card.setdefault(row.key.physicalgpu, []).append(row)
        totals: dict[UsageKey, float] = {}
        for name, card_rows in by_card.items():
            shares = _shares(card_rows)
            for row in card_rows:
                totals[row.key] = book.totals.get(row.key, 0.0) + increases.get(name, 0.0) * shares[row.key]
        book.totals = totals  # rows that ended take their totals with them
        return [replace(row, energy_joules=totals[row.key]) for row in rows]


def _shares(rows: list[UsageRow]) -> dict[UsageKey, float]:
    """Each row's part of its card's energy: by SM share where sampled, else by memory held."""
    weights: tuple[Callable[[UsageRow], int], ...] = (
        lambda r: r.sm_percent or 0,
        lambda r: r.memory_bytes or 0,
    )
    for weight in weights:
        total = sum(weight(r) for r in rows)
        if total > 0:
            return {r.key: weight(r) / total for r in rows}
    return {r.key: 0.0 for r in rows}


def _cap(rows: list[UsageRow], max_series: int) -> tuple[list[UsageRow], int]:
    """At most ``max_series`` rows: the largest by memory are kept, the rest summed per device."""
    if len(rows) <= max_series:
        return rows, 0
    ordered = sorted(rows, key=lambda r: (r.key.attribution != ATTRIBUTED, -(r.memory_bytes or 0)))
    keep_count = max_series
    while (
        keep_count > 0
        and keep_count + len({(r.key.physicalgpu, r.key.uuid) for r in ordered[keep_count:]}) > max_series
    ):
        keep_count -= 1  # each folded device takes a row of its own
    kept, rest = ordered[:keep_count], ordered[keep_count:]
    folded: dict[UsageKey, _Sum] = {}
    for row in rest:
        key = UsageKey(
            namespace="",
            pod="",
            container="",
            claim="",
            physicalgpu=row.key.physicalgpu,
            uuid=row.key.uuid,
            attribution=CAPPED,
        )
        folded.setdefault(key, _Sum()).merge(row)
    kept += [
        UsageRow(key=k, processes=s.processes, memory_bytes=s.memory, sm_percent=s.sm)
        for k, s in folded.items()
    ]
    return kept, len(rest)


def _prepared_devices(
    claims: Iterable[ClaimRecord], cards: Mapping[str, str], uuids: Mapping[str, str]
) -> list[PreparedDevice]:
    """The completed claims' devices on cards the backend reads, with the UUID processes report."""
    found = []
    for claim in claims:
        if claim.state is not PreparePhase.PREPARE_COMPLETED:
            continue
        for device in claim.devices:
            uuid = _device_uuid(device, uuids)
            if device.card not in cards or uuid is None:
                continue
            found.append(
                PreparedDevice(
                    namespace=claim.namespace,
                    claim=claim.name,
                    claim_uid=claim.uid,
                    pool=device.pool,
                    device=device.device,
                    share_id=device.share_id,
                    card=device.card,
                    physicalgpu=cards[device.card],
                    uuid=uuid,
                )
            )
    return found


def _device_uuid(device: DeviceRecord, uuids: Mapping[str, str]) -> str | None:
    if for_vm(device):
        return None  # a card or vGPU given to a VM: its processes are the guest's, out of the host's sight
    if (mig := mig_record(device)) is not None:
        return mig.uuid
    return uuids.get(device.card)
