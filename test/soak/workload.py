"""The soak's load: a steady churn of GPU Pods of every kind we offer, each of which must fit.

Every Pod is given a card of its own kind beforehand (:func:`plan`): the cards of the nodes are
split among the kinds from what the slices offer, each kind gets as many concurrent Pods as its
cards hold (the cap), and each Pod asks for a device of its card only. So a Pod that is not Running
within the bound is a finding about our components, never a full or fragmented cluster. A kind
asks through its one-line extended resource where every card of the node its class could take is
the kind's (the scheduler allocates), else through a ResourceClaim that names the card; the
``controller`` kind creates its claim first and waits until gpu-dra-controller has allocated it
before its Pod references it.

Pods run busybox for a random lifetime and exit 0 (:func:`lifetimes`: short enough that the
Pods the cards hold at once can start at the rate asked); :meth:`Workload.step`, called by the soak's
loop, follows them, deletes finished ones and their claims, and starts new ones at the rate asked.
Each Pod's :class:`PodRecord` says what became of it: ``Completed``, or ``Lost`` with why.
"""

from __future__ import annotations

import contextlib
import enum
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kubernetes.client import ResourceV1ResourceClaim, V1Pod

from pkg.devcluster.images import BUSYBOX_IMAGE
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM
from soak.invariants import Json, SliceIndex

DRIVER: Final = "gpu.deckhouse.io"
VFIO_ANNOTATION: Final = f"{DRIVER}/vfio"  # as pkg.gpuhandler.preparation.kinds.VFIO_ANNOTATION
LABEL: Final = "soak.gpu.deckhouse.io/kind"
SHARE_PERCENT: Final = 50
COMPLETED: Final = "Completed"
LOST: Final = "Lost"


class Kind(enum.StrEnum):
    WHOLE = "whole"
    MIG = "mig"
    TIMESLICING = "timeslicing"
    MPS = "mps"
    VFIO = "vfio"
    VGPU = "vgpu"
    CONTROLLER = "controller"


@dataclass(frozen=True)
class Slot:
    """One card given to one kind: ``units`` Pods of the kind fit on it at once."""

    kind: Kind
    node: str
    card: str
    units: int
    device_class: str
    extended: str | None  # the extended resource to ask with, when the node is the kind's alone
    selector: str  # CEL that keeps the claim on this card (and profile)


@dataclass
class PodRecord:
    """What happened to one Pod of the workload (times from the soak's clock)."""

    name: str
    kind: Kind
    node: str
    card: str
    created: float
    lifetime: float
    claims: list[str] = field(default_factory=list)
    pod_created: float | None = None
    scheduled: float | None = None
    running: float | None = None
    finished: float | None = None
    deleted: float | None = None
    outcome: str | None = None
    why: str = ""
    disruption: str = ""  # the reason of the Pod's DisruptionTarget condition, once one was seen

    @property
    def live(self) -> bool:
        return self.deleted is None


# How each kind asks: its class, the extended resource of that class, the sharing, whether the
# class takes only cards of VM hosts (vmOnly).
_CLASSES: Final[Mapping[Kind, tuple[str, str | None]]] = {
    Kind.WHOLE: ("gpu-physical", "gpu"),
    Kind.MIG: ("gpu-mig-1g", "mig-1g"),
    Kind.TIMESLICING: ("gpu-timeslicing", None),
    Kind.MPS: ("gpu-mps", None),
    Kind.VFIO: ("gpu-physical", "gpu"),
    Kind.VGPU: ("gpu-vgpu", "vgpu"),
    Kind.CONTROLLER: ("gpu-physical", None),
}
_ROTATION: Final = (Kind.MIG, Kind.WHOLE, Kind.TIMESLICING, Kind.MPS, Kind.CONTROLLER)


@dataclass
class _Card:
    node: str
    address: str
    types: set[str] = field(default_factory=set)  # deviceType/sharingStrategy pairs offered
    vm_only: bool = False
    mig_1g: dict[str, set[int]] = field(default_factory=dict)  # 1g profile -> its placement starts


def plan(slices: Iterable[Json], *, vfio_nodes: Sequence[str] = ()) -> list[Slot]:
    """Splits the offered cards among the kinds: vGPU-mode cards to ``vgpu``, the cards of
    ``vfio_nodes`` (bare-metal VM hosts) to ``vfio``, the rest among the other kinds.

    First every kind gets one card, the kind fewest cards can serve choosing first and taking the
    card that serves fewest kinds (a MIG-capable card is not spent on a kind any card serves);
    then each remaining card goes to the kind with the fewest cards so far that it can serve. So
    a kind goes without a card only when no card is left that could serve it."""
    cards = _cards(slices)
    fixed: dict[tuple[str, str], Kind] = {}
    free: list[_Card] = []
    for card in sorted(cards.values(), key=lambda c: (c.node, c.address)):
        if "VGPU" in card.types:
            fixed[(card.node, card.address)] = Kind.VGPU
        elif card.node in vfio_nodes:
            fixed[(card.node, card.address)] = Kind.VFIO
        else:
            free.append(card)
    chosen = _one_card_each(free) | fixed
    counts: dict[Kind, int] = defaultdict(int)
    for kind in chosen.values():
        counts[kind] += 1
    for card in free:
        able = [k for k in _ROTATION if _serves(card, k)]
        if (card.node, card.address) in chosen or not able:
            continue
        kind = min(able, key=lambda k: (counts[k], _ROTATION.index(k)))
        counts[kind] += 1
        chosen[(card.node, card.address)] = kind
    slots = [_slot(cards[key], chosen[key]) for key in sorted(chosen)]
    return [_with_extended(slot, slots, cards) for slot in slots]


def _one_card_each(free: Sequence[_Card]) -> dict[tuple[str, str], Kind]:
    """One card for each kind of the rotation that some free card serves."""
    chosen: dict[tuple[str, str], Kind] = {}
    serving = {kind: [c for c in free if _serves(c, kind)] for kind in _ROTATION}
    for kind in sorted(_ROTATION, key=lambda k: (len(serving[k]), _ROTATION.index(k))):
        left = [c for c in serving[kind] if (c.node, c.address) not in chosen]
        if left:
            card = min(left, key=lambda c: (sum(_serves(c, k) for k in _ROTATION), c.node, c.address))
            chosen[(card.node, card.address)] = kind
    return chosen


# What a Pod holds its card for beyond its own lifetime: scheduling, Prepare and the container's
# start, then the soak noticing it finished, the deletions and Unprepare (about 3.5 s on average in
# the 30-minute run of 2026-11-29, whose 20-90 s Pods reached only 13 of the 60 Pods/min asked).
TURNOVER: Final = 4.0
SHORTEST_LIFETIME: Final = 6.0  # mean; a Pod must outlive its own start to be seen Running
LONGEST_LIFETIME: Final = 55.0  # mean; beyond it a slow rate would leave faults few Pods to hit


def lifetimes(at_once: int, rate: float) -> tuple[float, float]:
    """The range of Pod lifetimes (seconds) at which ``at_once`` concurrent Pods are replaced at
    ``rate`` Pods per minute: each Pod's turn lasts ``60 * at_once / rate`` seconds, of which
    :data:`TURNOVER` is not its own; uniform around that mean, ±50 %. A rate the cards cannot hold
    even at the shortest lifetime is not reached: the report prints the rate achieved."""
    turn = 60.0 * at_once / rate if rate > 0 else LONGEST_LIFETIME + TURNOVER
    mean = min(max(turn - TURNOVER, SHORTEST_LIFETIME), LONGEST_LIFETIME)
    return (mean * 0.5, mean * 1.5)


def caps(slots: Iterable[Slot]) -> dict[Kind, int]:
    """How many Pods of each kind the slots hold at once."""
    found: dict[Kind, int] = defaultdict(int)
    for slot in slots:
        found[slot.kind] += slot.units
    return dict(found)


def _cards(slices: Iterable[Json]) -> dict[tuple[str, str], _Card]:
    index = SliceIndex.of(slices)
    cards: dict[tuple[str, str], _Card] = {}
    for key, device in index.devices.items():
        address = index.attribute(key, "pciAddress")
        if key[0] != DRIVER or not address:
            continue
        card = cards.setdefault((device.node, str(address)), _Card(device.node, str(address)))
        device_type = str(index.attribute(key, "deviceType"))
        card.types.add(f"{device_type}/{index.attribute(key, 'sharingStrategy')}")
        card.types.add(device_type)
        card.vm_only |= bool(index.attribute(key, "vmOnly"))
        profile = str(index.attribute(key, "migProfile") or "")
        if device_type == "MIG" and profile.startswith("1g.") and "+" not in profile:
            card.mig_1g.setdefault(profile, set()).add(int(index.attribute(key, "placementStart") or 0))
    return cards


def _serves(card: _Card, kind: Kind) -> bool:
    if card.vm_only:
        return False
    match kind:
        case Kind.MIG:
            return bool(card.mig_1g)
        case Kind.TIMESLICING:
            return "Physical/TimeSlicing" in card.types
        case Kind.MPS:
            return "Physical/MPS" in card.types
        case _:
            return "Physical/Exclusive" in card.types


def _slot(card: _Card, kind: Kind) -> Slot:
    device_class, _ = _CLASSES[kind]
    selector = f'device.attributes["{DRIVER}"].pciAddress == "{card.address}"'
    units = 1
    if kind is Kind.MIG:
        # One profile (the one with most placements, the smallest), so the count of Pods that fit
        # at once is exactly its placements: a larger 1g profile would cover two of them.
        profile = max(card.mig_1g, key=lambda p: (len(card.mig_1g[p]), p))
        selector += f' && device.attributes["{DRIVER}"].migProfile == "{profile}"'
        units = len(card.mig_1g[profile])
    elif kind in (Kind.TIMESLICING, Kind.MPS):
        units = 100 // SHARE_PERCENT
    elif kind is Kind.VFIO and card.vm_only:
        device_class = "gpu-vm-passthrough"
    return Slot(kind, card.node, card.address, units, device_class, None, selector)


def _with_extended(slot: Slot, slots: Sequence[Slot], cards: Mapping[tuple[str, str], _Card]) -> Slot:
    """The slot asking with its kind's extended resource when every card of its node that the
    kind's class could take belongs to that kind; a claim naming the card otherwise."""
    _, extended = _CLASSES[slot.kind]
    if extended is None:
        return slot
    if slot.kind is Kind.VFIO and slot.device_class == "gpu-vm-passthrough":
        extended = "vm-passthrough"
    probe = Kind.WHOLE if slot.kind is Kind.VFIO else slot.kind
    mine = {s.card for s in slots if s.node == slot.node and s.kind is slot.kind}
    rivals = {
        c.address
        for c in cards.values()
        if c.node == slot.node and c.address not in mine and _serves(c, probe)
    }
    if slot.kind is Kind.VGPU:
        rivals = {c.address for c in cards.values() if c.node == slot.node and "VGPU" in c.types} - mine
    if rivals or slot.kind is Kind.MIG:  # the 1g class would take a larger 1g profile too
        return slot
    return Slot(slot.kind, slot.node, slot.card, slot.units, slot.device_class, extended, slot.selector)


class Workload:
    """Starts, follows and removes the soak's Pods in ``namespace``; see :meth:`step`."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        slots: Sequence[Slot],
        *,
        rate: float,
        bound: float,
        rng: random.Random,
        lifetime: tuple[float, float] = (20.0, 90.0),
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._slots = list(slots)
        self._rate = rate  # Pods per minute
        self._bound = bound
        self._rng = rng
        self._lifetime = lifetime
        self._budget = 0.0
        self._last: float | None = None
        self._seq = 0
        self._turn = 0
        self.records: dict[str, PodRecord] = {}

    @property
    def caps(self) -> dict[Kind, int]:
        return caps(self._slots)

    def step(self, now: float, *, calm_since: float = 0.0) -> list[str]:
        """One round: follow the Pods, remove what finished or was lost, start what the rate
        allows. ``calm_since``: when the last fault healed (``now`` or later while one is under
        way): a Pod is lost for being stuck only once the bound has run out since both its
        creation and that. Returns what it did, one line per action."""
        done = self._follow(now, calm_since)
        done += self._remove(now)
        done += self._start(now)
        return done

    def _follow(self, now: float, calm_since: float) -> list[str]:
        pods, _ = self._kube.list(POD, namespace=self._namespace, label_selector=LABEL)
        seen = {p.metadata.name: p for p in pods if p.metadata is not None and p.metadata.name}
        done = []
        for record in self.records.values():
            if record.outcome is not None or not record.live:
                continue
            if record.pod_created is None:
                done += self._await_claim(record, now, calm_since)
                continue
            pod = seen.get(record.name)
            if pod is None:
                done.append(self._lose(record, now, _vanished(record)))
                continue
            record.disruption = record.disruption or _disruption(pod)
            phase, reason = _phase(pod)
            if pod.spec is not None and pod.spec.node_name and record.scheduled is None:
                record.scheduled = now
            if phase in ("Running", "Succeeded") and record.running is None:
                record.running = now
            if phase == "Succeeded":
                record.finished, record.outcome = now, COMPLETED
                done.append(f"completed {record.name}")
            elif phase == "Failed":
                record.finished = now
                why = "evicted" if reason == "Evicted" else "failed"
                marked = f" (marked {record.disruption})" if record.disruption else ""
                done.append(self._lose(record, now, f"{why}: {reason or 'no reason given'}{marked}"))
            elif phase != "Running" and now - max(record.created, calm_since) > self._bound:
                done.append(
                    self._lose(
                        record, now, f"stuck {phase} ({reason or 'no reason'}) beyond {self._bound:.0f}s"
                    )
                )
        return done

    def _await_claim(self, record: PodRecord, now: float, calm_since: float) -> list[str]:
        try:
            claim = self._kube.get(RESOURCE_CLAIM, record.claims[0], self._namespace)
        except NotFoundError:
            return [
                self._lose(record, now, f"vanished: claim {record.claims[0]} was deleted by someone else")
            ]
        if claim.status is not None and claim.status.allocation is not None:
            record.scheduled = now
            self._kube.create(POD, self._pod(record, self._slot_of(record)), namespace=self._namespace)
            record.pod_created = now
            return [f"created {record.name} for its claim allocated by gpu-dra-controller"]
        if now - max(record.created, calm_since) > self._bound:
            return [
                self._lose(record, now, f"claim {record.claims[0]} not allocated within {self._bound:.0f}s")
            ]
        return []

    def _lose(self, record: PodRecord, now: float, why: str) -> str:
        record.outcome, record.why = LOST, why
        if record.finished is None:
            record.finished = now
        return f"lost {record.name}: {why}"

    def _remove(self, now: float) -> list[str]:
        done = []
        for record in self.records.values():
            if record.outcome is None or not record.live:
                continue
            # The claims first: a claim whose Pod is gone while it stays is a claim no Pod
            # references, which gpu-dra-controller allocates again the moment kube-controller-
            # manager releases it; marked for deletion first, it is never allocated again.
            for claim in record.claims:
                with contextlib.suppress(NotFoundError):
                    self._kube.delete(RESOURCE_CLAIM, claim, self._namespace)
            with contextlib.suppress(NotFoundError):
                self._kube.delete(POD, record.name, self._namespace)
            record.deleted = now
            done.append(f"deleted {record.name}")
        return done

    def _start(self, now: float) -> list[str]:
        if self._last is not None:
            self._budget = min(self._budget + (now - self._last) * self._rate / 60.0, max(self._rate, 1.0))
        else:
            self._budget = 1.0
        self._last = now
        done = []
        while self._budget >= 1.0:
            slot = self._free_slot()
            if slot is None:
                break
            self._budget -= 1.0
            done.append(self._create(slot, now))
        return done

    def _free_slot(self) -> Slot | None:
        """The next kind in turn that has room, and its least used card."""
        used: dict[tuple[Kind, str], int] = defaultdict(int)
        for record in self.records.values():
            if record.live:
                used[(record.kind, record.card)] += 1
        kinds = sorted({s.kind for s in self._slots}, key=list(Kind).index)
        for offset in range(len(kinds)):
            kind = kinds[(self._turn + offset) % len(kinds)]
            free = [s for s in self._slots if s.kind is kind and used[(kind, s.card)] < s.units]
            if free:
                self._turn = (self._turn + offset + 1) % len(kinds)
                return min(free, key=lambda s: (used[(kind, s.card)], s.node, s.card))
        return None

    def _create(self, slot: Slot, now: float) -> str:
        self._seq += 1
        name = f"soak-{slot.kind.value}-{self._seq}"
        lifetime = round(self._rng.uniform(*self._lifetime))
        record = PodRecord(name, slot.kind, slot.node, slot.card, now, lifetime)
        self.records[name] = record
        if slot.extended is None:
            record.claims.append(name)
        if slot.kind is Kind.CONTROLLER:  # the claim alone: gpu-dra-controller allocates it
            self._kube.create(RESOURCE_CLAIM, claim_for(name, slot), namespace=self._namespace)
            return f"created claim {name} for gpu-dra-controller"
        # The Pod first, so that the claim is referenced from the start and the scheduler allocates it.
        self._kube.create(POD, self._pod(record, slot), namespace=self._namespace)
        record.pod_created = now
        if record.claims:
            self._kube.create(RESOURCE_CLAIM, claim_for(name, slot), namespace=self._namespace)
        return f"created {name} on {slot.node} {slot.card}"

    def _slot_of(self, record: PodRecord) -> Slot:
        return next(
            s
            for s in self._slots
            if s.kind is record.kind and s.card == record.card and s.node == record.node
        )

    def _pod(self, record: PodRecord, slot: Slot) -> V1Pod:
        return pod_for(
            record.name, slot, lifetime=record.lifetime, claim=record.claims[0] if record.claims else None
        )


def pod_for(name: str, slot: Slot, *, lifetime: float, claim: str | None) -> V1Pod:
    """The Pod of one slot: busybox that lives ``lifetime`` seconds and exits 0, on the slot's node,
    asking for its extended resource or using ``claim``."""
    container: dict[str, Any] = {
        "name": "main",
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", f"sleep {lifetime:.0f}; exit 0"],
    }
    spec: dict[str, Any] = {
        "nodeSelector": {"kubernetes.io/hostname": slot.node},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if claim is not None:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    else:
        assert slot.extended is not None
        resource = f"{DRIVER}/{slot.extended}"
        container["resources"] = {"limits": {resource: "1"}, "requests": {resource: "1"}}
    metadata: dict[str, Any] = {"name": name, "labels": {LABEL: slot.kind.value}}
    if slot.kind in (Kind.VFIO, Kind.VGPU):
        metadata["annotations"] = {VFIO_ANNOTATION: "true"}
    return V1Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


def claim_for(name: str, slot: Slot) -> ResourceV1ResourceClaim:
    """The claim of one slot: a device of its class on its card (a share's percentage for shares)."""
    exactly: dict[str, Any] = {
        "deviceClassName": slot.device_class,
        "selectors": [{"cel": {"expression": slot.selector}}],
    }
    if slot.kind in (Kind.TIMESLICING, Kind.MPS):
        exactly["capacity"] = {"requests": {"sharePercent": str(SHARE_PERCENT)}}
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": {LABEL: slot.kind.value}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    return ResourceV1ResourceClaim.model_validate(body)


def _vanished(record: PodRecord) -> str:
    if record.disruption:
        return f"evicted: the Pod was deleted for {record.disruption}"
    return "vanished: the Pod was deleted by someone else"


def _disruption(pod: V1Pod) -> str:
    """Why a controller is about to delete the Pod (its DisruptionTarget condition), if it says."""
    for condition in (pod.status.conditions if pod.status is not None else None) or []:
        if condition.type == "DisruptionTarget" and condition.status == "True":
            return condition.reason or "DisruptionTarget"
    return ""


def _phase(pod: V1Pod) -> tuple[str, str]:
    """The Pod's phase and the most telling reason it gives (evicted, a container waiting)."""
    status = pod.status
    if status is None:
        return "Pending", ""
    reasons = [status.reason or ""]
    for container in status.container_statuses or []:
        state = container.state
        if state is not None and state.waiting is not None:
            reasons.append(state.waiting.reason or "")
        if state is not None and state.terminated is not None and state.terminated.exit_code:
            reasons.append(f"exit code {state.terminated.exit_code}")
    return status.phase or "Pending", ", ".join(r for r in reasons if r)
