"""The status book: what gpu-handler says about each of its devices in their claims' ``status.devices``.

An entry's ``data`` is one atomic value for server-side apply, so two writers that each sent part
of it would take it from each other on every write. The book is therefore the only source of our
entries: per claim (by uid) it keeps each device's identity, its ``Ready`` and ``Healthy``
conditions and its latest published usage, and the one applier (:mod:`.claim_status`) always
writes a claim's entries whole from it. Three feeders change it, each from its own thread:

* the kubelet plugin's Prepare and Unprepare (gRPC threads): ``Ready`` True or False with the
  failure's reason, and the claim's removal;
* the health tracker's verdict changes (its subscribers' thread): ``Healthy`` of every device on
  the card;
* the attribution (its loop): the usage, already thinned to material changes.

A lock serialises them, and every change marks the claim pending and wakes the status loop
(:attr:`DeviceStatusBook.wake`). ``lastTransitionTime`` moves only when a condition's status
does, as ``meta.SetStatusCondition`` has it; a new reason or message alone keeps it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from api.gpu.v1alpha1 import DeviceStatusData, UsageFigures
from pkg.domain.names import DRIVER
from pkg.gpuhandler.health import CardHealth
from pkg.gpuhandler.preparation.services import DeviceKey

READY: Final = "Ready"
HEALTHY: Final = "Healthy"
PREPARED: Final = "Prepared"
# The API server allows 32 KiB in a condition's message; ours name one failure, briefly.
MAX_MESSAGE_CHARS: Final = 1024


@dataclass(frozen=True, kw_only=True)
class Condition:
    """A ``metav1.Condition`` of an entry (no ``observedGeneration``: the node never reads the spec)."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: datetime

    def moved_to(self, status: str, reason: str, message: str, now: datetime) -> Condition:
        """This condition with a new state; the transition time moves only with the status."""
        since = self.last_transition_time if status == self.status else now
        return Condition(
            type=self.type, status=status, reason=reason, message=message, last_transition_time=since
        )

    def to_api_dict(self) -> dict[str, str]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }


@dataclass(frozen=True, kw_only=True)
class DeviceIdentity:
    """A prepared device as the checkpoint records it: its key, its card and what ``data`` names."""

    key: DeviceKey
    card: str | None
    data: DeviceStatusData


@dataclass
class _Device:
    card: str | None
    data: DeviceStatusData | None = None
    ready: Condition | None = None
    healthy: Condition | None = None
    usage: UsageFigures | None = None


@dataclass
class _Claim:
    namespace: str
    name: str
    devices: dict[DeviceKey, _Device] = field(default_factory=dict)
    unresolved: bool = False  # a failure's devices are not known yet: the loop reads the allocation
    failure: tuple[str, str] | None = None  # the last failed Prepare's reason and message
    generation: int = 0  # bumped on every change; the loop settles only what it wrote


@dataclass(frozen=True, kw_only=True)
class ClaimEntries:
    """One claim's entries as the applier sends them: ``entries`` empty removes ours."""

    namespace: str
    name: str
    uid: str
    generation: int
    entries: tuple[dict[str, Any], ...]
    unresolved: bool = False
    failure: tuple[str, str] | None = None


def bounded(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 3] + "..."


def health_condition(health: CardHealth | None, previous: Condition | None, now: datetime) -> Condition:
    """``Healthy`` from the card's verdict: True while healthy, False with the verdict's reason (the
    event, the probe's fault) while degraded or fatal, Unknown before the card has one."""
    if health is None:
        status, reason, message, since = "Unknown", "NotReported", "no health verdict for the card yet", now
    elif health.healthy:
        status, reason, message, since = "True", HEALTHY, "", health.since
    else:
        status, reason, message, since = "False", health.reason, bounded(health.message), health.since
    if previous is not None:
        return previous.moved_to(status, reason, message, since)
    return Condition(type=HEALTHY, status=status, reason=reason, message=message, last_transition_time=since)


class DeviceStatusBook:
    """The book; see the module. ``verdicts`` gives the node's health verdicts by PCI address, for
    a device's first ``Healthy``; ``now`` is the conditions' clock (seconds, as the API keeps)."""

    def __init__(
        self,
        *,
        verdicts: Callable[[], Mapping[str, CardHealth]],
        now: Callable[[], datetime],
    ) -> None:
        self._verdicts = verdicts
        self._now = now
        self._lock = threading.Lock()
        self._claims: dict[str, _Claim] = {}
        self._removing: dict[str, _Claim] = {}
        self._pending: set[str] = set()
        self.wake = threading.Event()

    def prepared(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        devices: Iterable[DeviceIdentity],
        since: datetime | None = None,
    ) -> None:
        """Prepare succeeded: ``Ready`` True for each device, with its identity, and ``Healthy``
        from its card's verdict; devices of an earlier plan that are not in this one go. ``since``:
        when it was prepared, if not now (a claim found prepared at start-up)."""
        verdicts = self._verdicts()
        with self._lock:
            now = since or self._now()
            claim = self._claim(namespace, name, uid)
            claim.unresolved, claim.failure = False, None
            kept: dict[DeviceKey, _Device] = {}
            for identity in devices:
                device = claim.devices.get(identity.key) or _Device(card=identity.card)
                device.card, device.data = identity.card, identity.data
                device.ready = _ready(device.ready, "True", PREPARED, "", now)
                health = verdicts.get(identity.card) if identity.card else None
                device.healthy = health_condition(health, device.healthy, now)
                kept[identity.key] = device
            claim.devices = kept
            self._changed(uid, claim)

    def failed(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        devices: Iterable[DeviceKey] | None,
        reason: str,
        message: str,
    ) -> None:
        """Prepare failed: ``Ready`` False with its reason for each device (``None``: not known
        yet; the status loop reads them from the claim's allocation and calls again)."""
        with self._lock:
            now = self._now()
            claim = self._claim(namespace, name, uid)
            claim.unresolved = devices is None
            for key in devices or ():
                device = claim.devices.setdefault(key, _Device(card=None))
                device.ready = _ready(device.ready, "False", reason, bounded(message), now)
            claim.failure = (reason, message)
            self._changed(uid, claim)

    def unprepared(self, *, uid: str) -> None:
        """Unprepare succeeded: our entries of the claim go (the next write sends none)."""
        with self._lock:
            claim = self._claims.pop(uid, None)
            if claim is None:
                return
            claim.devices, claim.unresolved = {}, False
            self._removing[uid] = claim
            self._changed(uid, claim)

    def card_health(self, card: str, health: CardHealth) -> None:
        """The card's verdict changed: ``Healthy`` of each of its devices follows."""
        with self._lock:
            now = self._now()
            for uid, claim in self._claims.items():
                touched = False
                for device in claim.devices.values():
                    if device.card == card and device.ready is not None and device.ready.status == "True":
                        device.healthy = health_condition(health, device.healthy, now)
                        touched = True
                if touched:
                    self._changed(uid, claim)

    def usage(self, uid: str, usages: Mapping[DeviceKey, UsageFigures]) -> None:
        """The attribution's latest usage of the claim's prepared devices (already thinned)."""
        with self._lock:
            claim = self._claims.get(uid)
            if claim is None:
                return
            touched = False
            for key, figures in usages.items():
                device = claim.devices.get(key)
                if device is not None and device.data is not None:
                    device.usage = figures
                    touched = True
            if touched:
                self._changed(uid, claim)

    def pending(self) -> list[ClaimEntries]:
        """The claims whose entries changed since last settled, as the applier sends them."""
        with self._lock:
            return [self._entries(uid) for uid in sorted(self._pending)]

    def settle(self, uid: str, generation: int) -> None:
        """What ``generation`` said is on the server (or never can be): the claim is no longer
        pending, unless it changed meanwhile; a removed claim is forgotten."""
        with self._lock:
            claim = self._claims.get(uid) or self._removing.get(uid)
            if claim is None or claim.generation != generation:
                return
            self._pending.discard(uid)
            self._removing.pop(uid, None)

    def forget(self, uid: str) -> None:
        """The claim is gone from the API: nothing of it is written again."""
        with self._lock:
            self._claims.pop(uid, None)
            self._removing.pop(uid, None)
            self._pending.discard(uid)

    def _claim(self, namespace: str, name: str, uid: str) -> _Claim:
        self._removing.pop(uid, None)
        claim = self._claims.get(uid)
        if claim is None:
            claim = self._claims[uid] = _Claim(namespace=namespace, name=name)
        return claim

    def _changed(self, uid: str, claim: _Claim) -> None:
        claim.generation += 1
        self._pending.add(uid)
        self.wake.set()

    def _entries(self, uid: str) -> ClaimEntries:
        claim = self._claims.get(uid) or self._removing[uid]
        entries = []
        for key in sorted(claim.devices, key=lambda k: (k.pool, k.device, k.share_id or "")):
            entries.append(_entry(key, claim.devices[key]))
        return ClaimEntries(
            namespace=claim.namespace,
            name=claim.name,
            uid=uid,
            generation=claim.generation,
            entries=tuple(entries),
            unresolved=claim.unresolved,
            failure=claim.failure,
        )


def _ready(previous: Condition | None, status: str, reason: str, message: str, now: datetime) -> Condition:
    if previous is None:
        return Condition(type=READY, status=status, reason=reason, message=message, last_transition_time=now)
    return previous.moved_to(status, reason, message, now)


def _entry(key: DeviceKey, device: _Device) -> dict[str, Any]:
    entry: dict[str, Any] = {"driver": DRIVER, "pool": key.pool, "device": key.device}
    if key.share_id is not None:
        entry["shareID"] = key.share_id
    conditions = [c.to_api_dict() for c in (device.ready, device.healthy) if c is not None]
    if conditions:
        entry["conditions"] = conditions
    if device.data is not None:
        data = device.data if device.usage is None else device.data.model_copy(update={"usage": device.usage})
        entry["data"] = data.to_api_dict()
    return entry


__all__ = [
    "HEALTHY",
    "READY",
    "ClaimEntries",
    "Condition",
    "DeviceIdentity",
    "DeviceKey",
    "DeviceStatusBook",
    "bounded",
    "health_condition",
]
