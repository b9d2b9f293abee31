"""What must hold throughout the soak, as pure functions over snapshots taken from outside our code.

The inputs are the API server's objects as JSON (what ``kubectl get -o json`` prints and
``ResourceKind.encode`` gives) and the host objects of :mod:`soak.host_state`; the functions keep
no state, so each rule is tested with hand-made objects and the orchestrator decides when to look.
A rule that needs to remember (how long a host object has had no owner) takes what it remembered
as an argument and returns the new memory with its verdict.

Counters are charged the way the kube-scheduler charges them (KEP-4815, partitionable devices):
each allocated device consumes its ``consumesCounters`` once, however many claims share it, so two
shares of one card fit under the card's counters while a whole card and a MIG device of it do not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pkg.dra.allocator.quantity import parse_quantity
from soak.host_state import HostObject, mig_placement

Json = Mapping[str, Any]
DeviceKey = tuple[str, str, str]  # driver, pool, device
DRIVER = "gpu.deckhouse.io"
_SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``kind`` (the rule), a message naming the objects, when it was seen."""

    kind: str
    message: str
    at: float
    objects: tuple[str, ...] = ()


@dataclass(frozen=True)
class SliceDevice:
    """What the slices say of one device: where it is, whether it may be shared, what it consumes."""

    node: str
    allow_multiple: bool
    taints: tuple[Json, ...]
    consumes: tuple[tuple[str, str, int], ...]  # counter set, counter, amount
    attributes: Json


@dataclass(frozen=True)
class SliceIndex:
    """The devices and counter sets of a set of ResourceSlices, by key."""

    devices: Mapping[DeviceKey, SliceDevice]
    capacity: Mapping[tuple[str, str, str, str], int]  # driver, pool, counter set, counter

    @classmethod
    def of(cls, slices: Iterable[Json]) -> SliceIndex:
        """Only each pool's newest generation counts, as for the scheduler: a pool being republished
        has slices of two generations for a moment, and the older ones are on their way out. A pool
        whose newest generation is not complete yet counts not at all (:func:`_newest_generation`)."""
        devices: dict[DeviceKey, SliceDevice] = {}
        capacity: dict[tuple[str, str, str, str], int] = {}
        for slice_ in _newest_generation(slices):
            spec = slice_.get("spec") or {}
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            for counter_set in spec.get("sharedCounters") or []:
                for counter, value in (counter_set.get("counters") or {}).items():
                    capacity[(driver, pool, counter_set["name"], counter)] = _amount(value)
            for device in spec.get("devices") or []:
                consumes = tuple(
                    (use["counterSet"], counter, _amount(value))
                    for use in device.get("consumesCounters") or []
                    for counter, value in (use.get("counters") or {}).items()
                )
                devices[(driver, pool, device["name"])] = SliceDevice(
                    node=spec.get("nodeName") or "",
                    allow_multiple=bool(device.get("allowMultipleAllocations")),
                    taints=tuple(device.get("taints") or ()),
                    consumes=consumes,
                    attributes=device.get("attributes") or {},
                )
        return cls(devices=devices, capacity=capacity)

    def or_else(self, earlier: SliceIndex | None) -> SliceIndex:
        """These slices, with what ``earlier`` slices said of devices and counter sets these lack:
        a node's pool withdrawn for a moment (its kubelet restarted by a reboot wipes it until the
        plugin registers again) does not make its devices unknown."""
        if earlier is None:
            return self
        return SliceIndex(
            devices={**earlier.devices, **self.devices}, capacity={**earlier.capacity, **self.capacity}
        )

    def attribute(self, key: DeviceKey, name: str) -> Any:
        """One of our attributes of the device (qualified or not, as the publisher chose), or None."""
        device = self.devices.get(key)
        if device is None:
            return None
        value = device.attributes.get(f"{DRIVER}/{name}", device.attributes.get(name))
        return None if value is None else next(iter(value.values()), None)


@dataclass(frozen=True)
class Allocated:
    """One allocation result of a claim."""

    claim: str  # namespace/name
    uid: str
    key: DeviceKey
    tolerations: tuple[Json, ...] = ()


def allocated(claims: Iterable[Json]) -> list[Allocated]:
    """Every allocation result of ``claims``."""
    found = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            found.append(Allocated(name, meta.get("uid", ""), key, tuple(result.get("tolerations") or ())))
    return found


def double_allocations(
    claims: Iterable[Json],
    slices: Iterable[Json],
    *,
    now: float,
    before: Iterable[Json] | None = None,
) -> list[Violation]:
    """A device in two claims that does not allow multiple allocations, or a counter set whose
    allocated devices consume more than it holds (a whole card next to a MIG device of it, two
    overlapping MIG placements). A device missing from ``slices`` is judged by ``before`` (the
    previous look's): two shares of a card whose pool is withdrawn for a moment are still shares."""
    index = SliceIndex.of(slices).or_else(SliceIndex.of(before) if before is not None else None)
    holders: dict[DeviceKey, set[str]] = defaultdict(set)
    for result in allocated(claims):
        holders[result.key].add(result.claim)
    found = []
    for key, names in sorted(holders.items()):
        device = index.devices.get(key)
        if len(names) > 1 and (device is None or not device.allow_multiple):
            found.append(
                Violation(
                    "DoubleAllocation",
                    f"device {_shown(key)} is allocated to {len(names)} claims: {', '.join(sorted(names))}",
                    now,
                    (_shown(key), *sorted(names)),
                )
            )
    used: dict[tuple[str, str, str, str], int] = defaultdict(int)
    users: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for key in holders:  # each device charged once, however many claims share it
        device = index.devices.get(key)
        for counter_set, counter, amount in device.consumes if device else ():
            used[(key[0], key[1], counter_set, counter)] += amount
            users[(key[0], key[1], counter_set)].add(key[2])
    over: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for counter_key, amount in sorted(used.items()):
        held = index.capacity.get(counter_key)
        if held is not None and amount > held:
            over[counter_key[:3]].append(f"{counter_key[3]} {amount} > {held}")
    for (driver, pool, counter_set), counters in sorted(over.items()):
        devices = sorted(users[(driver, pool, counter_set)])
        claimed = sorted({n for d in devices for n in holders[(driver, pool, d)]})
        found.append(
            Violation(
                "DoubleAllocation",
                f"counter set {pool}/{counter_set} over-committed ({'; '.join(counters)}) by devices "
                f"{', '.join(devices)} of claims {', '.join(claimed)}",
                now,
                (f"{driver}/{pool}/{counter_set}", *claimed),
            )
        )
    return found


def bad_allocations(
    new_claims: Iterable[Json],
    slices: Iterable[Json],
    *,
    now: float,
    before: Iterable[Json] | None = None,
) -> list[Violation]:
    """Allocations, first seen now, of a device the slices do not have or that carries a NoSchedule
    or NoExecute taint the request does not tolerate.

    ``slices`` are those read just after the claims, ``before`` those of the previous look (read
    before the allocation was first seen). An allocation is made somewhere in between, so it is
    bad only when the device is wrong in both: a pool withdrawn or republished since (a node's
    reboot, a restarted gpu-handler) shows a device that was offered when it was allocated as
    gone now, and a taint added since is not one the allocator could have seen."""
    index = SliceIndex.of(slices)
    earlier = SliceIndex.of(before) if before is not None else None
    found = []
    for result in allocated(new_claims):
        wrong = _wrong(result, index)
        if wrong is None or (earlier is not None and _wrong(result, earlier) is None):
            continue
        found.append(
            Violation(
                "BadAllocation",
                f"claim {result.claim} was allocated device {_shown(result.key)}, {wrong}"
                + (" (in the slices read before it was first seen too)" if earlier is not None else ""),
                now,
                (result.claim, _shown(result.key)),
            )
        )
    return found


def _wrong(result: Allocated, index: SliceIndex) -> str | None:
    """What is wrong with the device of one allocation in these slices, or None."""
    device = index.devices.get(result.key)
    if device is None:
        return "which no slice offers"
    for taint in device.taints:
        if taint.get("effect") in _SCHEDULING_EFFECTS and not _tolerated(taint, result.tolerations):
            return f"which is tainted {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"
    return None


def remembered_slices(previous: Iterable[Json], slices: Iterable[Json]) -> list[Json]:
    """The complete pools of this look, plus the last complete slices seen of every pool this look
    lacks or shows incomplete: what the checks pass as ``before``. A rebooted node's pool stays
    withdrawn for longer than one look (its kubelet wipes it, gpu-handler republishes only once the
    node is ready again: 13 s in a smoke run), while the claims of the Pods the reboot killed still
    hold their devices; judged by the previous look alone, two shares of a card then became "one
    exclusive device in two claims". A pool caught mid-republish is kept out for the same reason:
    the remembered one is the last that said what the pool offers."""
    current = _newest_generation(slices)
    present = {_pool(slice_)[0] for slice_ in current}
    return current + [slice_ for slice_ in previous if _pool(slice_)[0] not in present]


def _newest_generation(slices: Iterable[Json]) -> list[Json]:
    """The slices of each complete pool's newest generation.

    A pool whose newest generation has fewer slices than its ``resourceSliceCount`` is incomplete
    (the count is in the API so that a reader can tell): gpu-handler is writing it, one slice after
    the other (counters, then devices), or withdrawing it. What such a look shows of the pool is
    not what the allocators were offered: mid-republish the new counter slice stands alone while
    the device slice still has the previous generation, so every device of the pool looks gone.
    An incomplete pool is left out, as if the look lacked it."""
    pooled = [(_pool(slice_), slice_) for slice_ in slices]
    newest: dict[tuple[str, str], int] = {}
    for (pool, generation), _ in pooled:
        newest[pool] = max(newest.get(pool, generation), generation)
    current = [(pool, slice_) for (pool, generation), slice_ in pooled if generation == newest[pool]]
    held: dict[tuple[str, str], int] = defaultdict(int)
    for pool, _ in current:
        held[pool] += 1
    return [slice_ for pool, slice_ in current if held[pool] >= _slice_count(slice_)]


def _slice_count(slice_: Json) -> int:
    """The number of slices the slice's pool has in its generation (0 where not said)."""
    return int(((slice_.get("spec") or {}).get("pool") or {}).get("resourceSliceCount") or 0)


def _pool(slice_: Json) -> tuple[tuple[str, str], int]:
    """The slice's pool (driver, name) and the generation it belongs to."""
    spec = slice_.get("spec") or {}
    pool = spec.get("pool") or {}
    return (spec.get("driver", ""), pool.get("name", "")), int(pool.get("generation") or 0)


def newly_allocated(claims: Iterable[Json], seen: Collection[str]) -> list[Json]:
    """The claims whose allocation is not in ``seen`` (keys of :func:`allocation_key`)."""
    return [c for c in claims if (k := allocation_key(c)) is not None and k not in seen]


def allocation_key(claim: Json) -> str | None:
    """Names one allocation of one claim (its UID and devices); None while it is not allocated."""
    results = allocated([claim])
    if not results:
        return None
    return results[0].uid + "|" + ",".join(sorted(_shown(r.key) for r in results))


@dataclass(frozen=True)
class Leaks:
    """The leaks found now, and since when each unowned host object has been seen without owner
    (hand it to the next call)."""

    violations: list[Violation]
    unowned_since: Mapping[tuple[str, str, str], float] = field(default_factory=dict)


def leaks(
    host_state: Iterable[HostObject],
    claims: Iterable[Json],
    *,
    slices: Iterable[Json],
    now: float,
    grace: float,
    unowned_since: Mapping[tuple[str, str, str], float],
    baseline: Collection[tuple[str, str, str]] = (),
) -> Leaks:
    """Host objects no allocated claim on their node owns, reported once they have been without an
    owner for longer than ``grace`` (a Prepare or Unprepare in flight is not a leak).

    An object that names its claim (a CDI spec, a checkpoint record) is owned by that claim when it
    is allocated on the object's node; one that names only a card (a MIG instance, an mdev, a vfio
    binding, an MPS daemon) by any claim allocated a device of that card of the object's kind.
    ``baseline`` holds what the host had before the workload began (a card bound to vfio-pci at
    boot), never a leak."""
    index = SliceIndex.of(slices)
    owners = _owners(allocated(claims), index)
    since: dict[tuple[str, str, str], float] = {}
    found = []
    for obj in host_state:
        key = obj.key
        if key in baseline or _owned(obj, owners):
            continue
        first = unowned_since.get(key, now)
        since[key] = first
        if now - first > grace:
            owner = f" (names claim {obj.owner})" if obj.owner else ""
            found.append(
                Violation(
                    "Leak",
                    f"{obj.kind} {obj.id} on node {obj.node}{owner} has had no allocated claim owning it "
                    f"for {now - first:.0f}s",
                    now,
                    (f"{obj.node}/{obj.kind}/{obj.id}",),
                )
            )
    return Leaks(found, since)


@dataclass(frozen=True)
class _Owners:
    uids: frozenset[tuple[str, str]]  # node, claim UID
    cards: frozenset[tuple[str, str, str]]  # node, kind, card-level identity


def _owners(results: Sequence[Allocated], index: SliceIndex) -> _Owners:
    uids, cards = set(), set()
    for result in results:
        device = index.devices.get(result.key)
        if device is None:
            continue
        uids.add((device.node, result.uid))
        card = str(index.attribute(result.key, "pciAddress") or "")
        device_type = index.attribute(result.key, "deviceType")
        sharing = index.attribute(result.key, "sharingStrategy")
        if device_type == "MIG":
            cards.add(
                (device.node, "mig", mig_placement(card, index.attribute(result.key, "placementStart")))
            )
        elif device_type == "VGPU":
            cards.add((device.node, "mdev", card))
        elif sharing == "MPS":
            cards.add((device.node, "mps-daemon", card))
        elif device_type == "Physical":
            cards.add((device.node, "vfio", _slot(card)))
        if result.key[2].startswith("imex-channel-"):
            cards.add((device.node, "imex-channel", result.key[2].removeprefix("imex-channel-")))
    return _Owners(frozenset(uids), frozenset(cards))


def _owned(obj: HostObject, owners: _Owners) -> bool:
    if obj.owner is not None:
        return (obj.node, obj.owner) in owners.uids
    match obj.kind:
        case "mig-gi" | "mig-ci":
            return (obj.node, "mig", obj.id.split("/", 1)[0]) in owners.cards
        case "vfio":
            return (obj.node, "vfio", _slot(obj.card or "")) in owners.cards
        case "imex-channel":
            return (obj.node, "imex-channel", obj.id) in owners.cards
        case _:
            return (obj.node, obj.kind, obj.card or "") in owners.cards


def _slot(address: str) -> str:
    """The PCI slot of a function (``0000:65:00.1`` → ``0000:65:00``): a card and its audio
    function go to vfio-pci together."""
    return address.rsplit(".", 1)[0]


def unrecovered(pods: Iterable[Json], now: float, bound: float, *, healed_at: float) -> list[Violation]:
    """Pods of the workload (every one of them fits) that are not Running ``bound`` seconds after
    the last fault healed at ``healed_at``, and were created before that bound ran out. A Pod that
    finished (Succeeded) is fine; one that Failed is not."""
    if now < healed_at + bound:
        return []
    found = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        phase = status.get("phase", "Pending")
        if phase in ("Running", "Succeeded") or meta.get("deletionTimestamp"):
            continue
        created = _epoch(meta.get("creationTimestamp"))
        if created is not None and now - created < bound:
            continue  # a Pod made recently has its own bound still running
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        found.append(
            Violation(
                "Unrecovered",
                f"Pod {name} is {phase} ({_waiting(status)}) "
                f"{now - healed_at:.0f}s after the last fault healed",
                now,
                (name,),
            )
        )
    return found


def restart_loops(
    restarts: Mapping[str, Sequence[float]], *, now: float, window: float, threshold: int
) -> list[Violation]:
    """Components that restarted on their own ``threshold`` times or more within the last
    ``window`` seconds (``restarts``: the times of each one's restarts we did not cause)."""
    found = []
    for name, times in sorted(restarts.items()):
        recent = [t for t in times if now - t <= window]
        if len(recent) >= threshold:
            found.append(
                Violation(
                    "RestartLoop",
                    f"{name} restarted {len(recent)} times in the last {window:.0f}s",
                    now,
                    (name,),
                )
            )
    return found


def memory_growth(
    samples: Mapping[str, Sequence[tuple[float, int]]], *, tolerance: float, now: float
) -> list[Violation]:
    """Components whose resident memory grew by more than ``tolerance`` (a fraction) from the first
    quarter of their samples to the last: the median of each quarter, so one spike (a resync, a
    burst of Pods) is not growth, while memory that grows with time is."""
    found = []
    for name, series in sorted(samples.items()):
        if len(series) < 4:
            continue
        quarter = len(series) // 4
        start = _median([rss for _, rss in series[:quarter]])
        end = _median([rss for _, rss in series[-quarter:]])
        if start > 0 and end > start * (1 + tolerance):
            found.append(
                Violation(
                    "MemoryGrowth",
                    f"{name} grew from {start / 2**20:.1f} MiB to {end / 2**20:.1f} MiB "
                    f"(+{(end / start - 1) * 100:.0f}%, tolerance {tolerance * 100:.0f}%)",
                    now,
                    (name,),
                )
            )
    return found


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _tolerated(taint: Json, tolerations: Iterable[Json]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def _waiting(status: Json) -> str:
    reasons = [
        str((s.get("state") or {}).get("waiting", {}).get("reason", ""))
        for s in status.get("containerStatuses") or []
    ]
    shown = ", ".join(r for r in reasons if r)
    return shown or str(status.get("reason") or "no container started")


def _epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _amount(value: Json) -> int:
    return parse_quantity(str(value.get("value", "0"))).value()


def _shown(key: DeviceKey) -> str:
    return "/".join(key)
