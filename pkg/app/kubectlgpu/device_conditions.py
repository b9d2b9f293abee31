"""Whether each of a claim's devices is prepared and healthy, as gpu-handler reports it.

gpu-handler writes, for each of our devices in a claim's ``status.devices[]`` (the DRA device
status: driver, pool, device, ``shareID``), two conditions in the standard ``metav1.Condition``
shape: ``Ready`` (Prepare succeeded, or the CamelCase reason it failed with) and ``Healthy`` (the
device's health as gpu-handler's monitoring last saw it). A Pod whose device failed to prepare
waits in ``ContainerCreating``; the kubelet's events about it age out and are not where a user of
the GPU looks, while the claim's ``Ready`` condition stays as long as the failure does. So these
conditions are what ``kubectl gpu`` reports, the failure first (this module turns them into text).

The status is writable by every driver and by whoever may update the claim's status, so it is
read defensively: entries of other drivers are ignored, and a malformed entry or condition becomes
a problem sentence naming the claim and the device, never an exception. Identity (the card's
PhysicalGPU, UUID, PCI address, a vGPU's mdev) is read from the entry's ``data`` only where it is
a plain string, so this module does not depend on which version of the data model wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from pkg.app.kubectlgpu.claims import held, key
from pkg.domain.names import DRIVER
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM

if TYPE_CHECKING:
    from kubernetes.client import ResourceV1ResourceClaim

READY: Final = "Ready"
HEALTHY: Final = "Healthy"
NOT_PREPARED: Final = "<not prepared>"
"""The STATUS of an allocated device gpu-handler has reported nothing for (not prepared yet)."""
MALFORMED: Final = "<malformed>"
_STATUSES: Final = ("True", "False", "Unknown")
_IDENTITY: Final = (
    ("physicalGPU", "PhysicalGPU"),
    ("uuid", "UUID"),
    ("pciBusID", "PCI"),
    ("mdevUUID", "mdev"),
)
"""The identity fields of ``data`` (``DeviceStatusData``) shown, and their labels."""


@dataclass(frozen=True)
class Condition:
    """One condition of a device, as written (``since``: its ``lastTransitionTime``, verbatim)."""

    type: str
    status: str
    reason: str
    message: str
    since: str | None = None

    def to_item(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.since,
        }


@dataclass(frozen=True)
class DeviceConditions:
    """One of our devices of a claim: its Ready and Healthy conditions (None: not reported)."""

    namespace: str
    claim: str
    pool: str
    device: str
    share_id: str | None
    node: str
    ready: Condition | None = None
    healthy: Condition | None = None
    identity: tuple[tuple[str, str], ...] = ()  # (field, value) from data, e.g. ("uuid", "GPU-...")
    problems: tuple[str, ...] = ()  # what in the entry is malformed, one sentence each

    @property
    def name(self) -> str:
        """The device as a user recognises it: a share carries the start of its share ID."""
        return f"{self.device}#{self.share_id[:8]}" if self.share_id else self.device

    @property
    def failed_prepare(self) -> bool:
        return self.ready is not None and self.ready.status == "False"

    @property
    def unhealthy(self) -> bool:
        return self.healthy is not None and self.healthy.status == "False"

    def status_text(self) -> str:
        """One word for a table cell: ``Ready``, ``NotReady(Reason)``, ``Unhealthy(Reason)`` (both,
        comma-joined, when both hold), ``<not prepared>`` or ``<malformed>``."""
        if self.problems and self.ready is None and self.healthy is None:
            return MALFORMED
        words = []
        if self.failed_prepare and self.ready is not None:
            words.append(f"NotReady({self.ready.reason or 'NoReason'})")
        if self.unhealthy and self.healthy is not None:
            words.append(f"Unhealthy({self.healthy.reason or 'NoReason'})")
        if words:
            return ",".join(words)
        if self.ready is None:
            return NOT_PREPARED
        return READY if self.ready.status == "True" else f"Ready{self.ready.status}"

    def to_item(self) -> dict[str, Any]:
        """The ``-o json|yaml`` form: raw fields, conditions by type, stable keys for scripts."""
        return {
            "namespace": self.namespace,
            "claim": self.claim,
            "node": self.node,
            "pool": self.pool,
            "device": self.device,
            "shareID": self.share_id,
            "conditions": {c.type: c.to_item() for c in (self.ready, self.healthy) if c is not None},
            **({"identity": dict(self.identity)} if self.identity else {}),
            **({"problems": list(self.problems)} if self.problems else {}),
        }


def device_conditions(claim: dict[str, Any]) -> list[DeviceConditions]:
    """One entry per device of our driver the claim's allocation holds, in allocation order, with
    what ``status.devices[]`` says of it; an entry there for a device the allocation does not name
    (left from an earlier allocation, or written by mistake) comes after them."""
    namespace, name = key(claim)
    entries, problems = _entries(claim)
    found: list[DeviceConditions] = []
    for h in held(claim):
        entry = entries.pop((h.pool, h.device, h.share_id), None)
        found.append(_read(DeviceConditions(namespace, name, h.pool, h.device, h.share_id, h.node), entry))
    for (pool, device, share_id), entry in entries.items():
        found.append(_read(DeviceConditions(namespace, name, pool, device, share_id, ""), entry))
    if problems:  # the list itself is unusable: said once, on a device-less entry
        found.append(DeviceConditions(namespace, name, "", "", None, "", problems=tuple(problems)))
    return found


def of_object(claim: ResourceV1ResourceClaim) -> list[DeviceConditions]:
    """:func:`device_conditions` of a claim read through the typed client."""
    return device_conditions(RESOURCE_CLAIM.encode(claim))


def section(devices: list[DeviceConditions]) -> str:
    """The devices' block of ``explain``'s text: a heading, then :func:`device_lines`."""
    if not devices:
        return ""
    return "devices (the conditions gpu-handler reports in status.devices):\n" + "".join(
        f"{line}\n" for line in device_lines(devices)
    )


def cause_lines(devices: list[DeviceConditions]) -> list[str]:
    """The sentences to say first: each failed Prepare (why a Pod waits in ContainerCreating) and
    each unhealthy device, with the reason and message as gpu-handler wrote them."""
    lines: list[str] = []
    for d in devices:
        where = f" on node {d.node}" if d.node else ""
        if d.failed_prepare and d.ready is not None:
            lines.append(
                f"Prepare of device {d.name} (claim {d.namespace}/{d.claim}) failed{where}: "
                f"{_because(d.ready)}; the kubelet retries it, and the Pod's containers wait "
                "(ContainerCreating) until it succeeds"
            )
        if d.unhealthy and d.healthy is not None:
            lines.append(
                f"device {d.name} (claim {d.namespace}/{d.claim}){where} is unhealthy: {_because(d.healthy)}"
            )
    return lines


def device_lines(devices: list[DeviceConditions]) -> list[str]:
    """One line per device, its conditions in the order a user asks (prepared? healthy?), then
    its identity, then what is malformed."""
    lines: list[str] = []
    for d in devices:
        if not d.device:
            lines.extend(f"  {p}" for p in d.problems)
            continue
        where = f" on node {d.node}" if d.node else ""
        said = [_condition_text(READY, d.ready), _condition_text(HEALTHY, d.healthy)]
        if d.ready is None and d.healthy is None:
            said = ["not prepared yet (gpu-handler has reported no condition for it)"]
        lines.append(f"  {d.name}{where}: " + "; ".join(said))
        if d.identity:
            lines.append("    " + ", ".join(f"{label} {value}" for label, value in _labelled(d.identity)))
        lines.extend(f"    malformed: {p}" for p in d.problems)
    return lines


def _condition_text(kind: str, condition: Condition | None) -> str:
    if condition is None:
        return f"{kind} not reported"
    return f"{kind}={condition.status} {_because(condition)}".rstrip()


def _because(condition: Condition) -> str:
    reason = condition.reason or "(no reason)"
    return f"{reason}: {condition.message}" if condition.message else reason


def _labelled(identity: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    labels = dict(_IDENTITY)
    return [(labels.get(field, field), value) for field, value in identity]


def _entries(claim: dict[str, Any]) -> tuple[dict[tuple[str, str, str | None], Any], list[str]]:
    """Our driver's entries of ``status.devices[]`` by (pool, device, shareID)."""
    namespace, name = key(claim)
    status = claim.get("status")
    raw = status.get("devices") if isinstance(status, dict) else None
    if raw is None:
        return {}, []
    if not isinstance(raw, list):
        return {}, [f"claim {namespace}/{name}: status.devices is a {type(raw).__name__}, not a list"]
    entries: dict[tuple[str, str, str | None], Any] = {}
    for entry in raw:
        if not isinstance(entry, dict) or entry.get("driver") != DRIVER:
            continue
        share_id = entry.get("shareID")
        entries[(str(entry.get("pool") or ""), str(entry.get("device") or ""), share_id or None)] = entry
    return entries, []


def _read(base: DeviceConditions, entry: Any) -> DeviceConditions:
    """``base`` (the device, no conditions) with what its status entry says; None: no entry."""
    if entry is None:
        return base
    where = f"claim {base.namespace}/{base.claim} device {base.name}"
    problems: list[str] = []
    by_type: dict[str, Condition] = {}
    conditions = entry.get("conditions")
    if conditions is not None and not isinstance(conditions, list):
        problems.append(f"{where}: conditions is a {type(conditions).__name__}, not a list")
        conditions = []
    for index, raw in enumerate(conditions or []):
        condition = _condition(raw)
        if isinstance(condition, str):
            problems.append(f"{where}: conditions[{index}] {condition}")
        elif condition.type in by_type:
            problems.append(f"{where}: conditions[{index}]: a second {condition.type} condition (ignored)")
        else:
            by_type[condition.type] = condition
    data = entry.get("data")
    identity = tuple(
        (field, data[field])
        for field, _ in _IDENTITY
        if isinstance(data, dict) and isinstance(data.get(field), str) and data[field]
    )
    return replace(
        base,
        ready=by_type.get(READY),
        healthy=by_type.get(HEALTHY),
        identity=identity,
        problems=tuple(problems),
    )


def _condition(raw: Any) -> Condition | str:
    """The condition, or what is wrong with it (completing ``conditions[i] ...``)."""
    if not isinstance(raw, dict):
        return f"is a {type(raw).__name__}, not an object"
    kind, status = raw.get("type"), raw.get("status")
    if not isinstance(kind, str) or not kind:
        return "has no type"
    if status not in _STATUSES:
        return f"({kind}) has status {status!r}, not one of True, False, Unknown"
    reason, message, since = raw.get("reason"), raw.get("message"), raw.get("lastTransitionTime")
    return Condition(
        type=kind,
        status=str(status),
        reason=reason if isinstance(reason, str) else "",
        message=message if isinstance(message, str) else "",
        since=str(since) if since is not None else None,
    )
