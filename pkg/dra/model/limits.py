"""Client-side checks of what the API server would reject in a ResourceSlice.

Every slice is checked before it is written, so a bad one never reaches the server: a violation
is a bug in the offer model (a new GPU model with too many profiles, a name that grew past a
limit), and :class:`SliceLimitError` names the object and the limit so the bug report writes
itself. The numbers are those of ``k8s.io/api/resource/v1`` and its validation (1.35-1.37); the
1.34 layout, where counter sets sit beside the devices, adds the older per-slice totals
(:data:`INLINE_MAX_SHARED_COUNTERS`, :data:`INLINE_MAX_CONSUMED_COUNTERS`), applied conservatively.
"""

from __future__ import annotations

import re

from kubernetes.client import V1CounterSet, V1Device, V1ResourceSlice

MAX_DEVICES = 128
MAX_DEVICES_ADVANCED = 64  # when any device consumes counters or has taints
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_CONSUMPTIONS_PER_DEVICE = 2
MAX_COUNTERS_PER_CONSUMPTION = 32
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_ATTRIBUTE_VALUE_LENGTH = 64
MAX_IDENTIFIER_LENGTH = 32
MAX_DOMAIN_LENGTH = 63
MAX_LABEL_LENGTH = 63
MAX_SUBDOMAIN_LENGTH = 253
MAX_TAINTS = 16
TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute", "None"})
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
INLINE_MAX_SHARED_COUNTERS = 32
INLINE_MAX_CONSUMED_COUNTERS = 1024

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL)
_DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?"
)


class SliceLimitError(ValueError):
    """An object we built breaks an API limit; ``obj`` names it, ``limit`` says which rule."""

    def __init__(self, obj: str, limit: str) -> None:
        super().__init__(f"{obj}: {limit} (a bug in the offer model, not a server error)")
        self.obj = obj
        self.limit = limit


def is_dns_label(name: str) -> bool:
    return len(name) <= MAX_LABEL_LENGTH and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= MAX_SUBDOMAIN_LENGTH and _DNS_SUBDOMAIN.fullmatch(name) is not None


def check_qualified_name(obj: str, key: str) -> None:
    """``[domain/]identifier``: domain a DNS subdomain of ≤63, identifier a C identifier of ≤32."""
    domain, slash, ident = key.rpartition("/")
    if slash and not (len(domain) <= MAX_DOMAIN_LENGTH and is_dns_subdomain(domain)):
        raise SliceLimitError(obj, f"key {key!r}: domain must be a DNS subdomain of at most 63 characters")
    if len(ident) > MAX_IDENTIFIER_LENGTH or _C_IDENTIFIER.fullmatch(ident) is None:
        raise SliceLimitError(obj, f"key {key!r}: name must be a C identifier of at most 32 characters")


def check_counters(obj: str, counters: dict[str, object], limit: int) -> None:
    if not counters:
        raise SliceLimitError(obj, "counters must not be empty")
    if len(counters) > limit:
        raise SliceLimitError(obj, f"{len(counters)} counters, at most {limit} allowed")
    for name in counters:
        if not is_dns_label(name):
            raise SliceLimitError(obj, f"counter name {name!r} must be a DNS label")


def validate_counter_set(counter_set: V1CounterSet) -> None:
    obj = f"counter set {counter_set.name}"
    if not is_dns_label(counter_set.name):
        raise SliceLimitError(obj, "counter set name must be a DNS label")
    check_counters(obj, dict(counter_set.counters), MAX_COUNTERS_PER_SET)


def validate_device(device: V1Device) -> None:
    obj = f"device {device.name}"
    if not is_dns_label(device.name):
        raise SliceLimitError(obj, "device name must be a DNS label of at most 63 characters")
    attributes, capacity = device.attributes or {}, device.capacity or {}
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        raise SliceLimitError(obj, f"{len(attributes) + len(capacity)} attributes and capacities, at most 32")
    for key, attr in attributes.items():
        check_qualified_name(obj, key)
        for text in (attr.string, attr.version):
            if text is not None and len(text.encode()) > MAX_ATTRIBUTE_VALUE_LENGTH:
                raise SliceLimitError(obj, f"attribute {key}: value longer than 64 bytes")
        if attr.version is not None and _SEMVER.fullmatch(attr.version) is None:
            raise SliceLimitError(obj, f"attribute {key}: {attr.version!r} is not a semantic version")
    for key, cap in capacity.items():
        check_qualified_name(obj, key)
        if cap.request_policy is not None and not device.allow_multiple_allocations:
            raise SliceLimitError(obj, f"capacity {key}: requestPolicy needs allowMultipleAllocations")
    _validate_taints(obj, device)
    consumes = device.consumes_counters or []
    if len(consumes) > MAX_CONSUMPTIONS_PER_DEVICE:
        raise SliceLimitError(obj, f"{len(consumes)} consumesCounters entries, at most 2")
    if len({c.counter_set for c in consumes}) != len(consumes):
        raise SliceLimitError(obj, "consumesCounters names a counter set twice")
    for use in consumes:
        check_counters(
            f"{obj} consumption of {use.counter_set}", dict(use.counters), MAX_COUNTERS_PER_CONSUMPTION
        )


def _validate_taints(obj: str, device: V1Device) -> None:
    """``ValidateLabelName`` for the key, a label value, a known effect, at most 16 taints."""
    taints = device.taints or []
    if len(taints) > MAX_TAINTS:
        raise SliceLimitError(obj, f"{len(taints)} taints, at most {MAX_TAINTS}")
    for taint in taints:
        prefix, slash, name = taint.key.rpartition("/")
        if (slash and not (len(prefix) <= MAX_SUBDOMAIN_LENGTH and is_dns_subdomain(prefix))) or not (
            0 < len(name) <= MAX_LABEL_LENGTH and _LABEL_VALUE.fullmatch(name)
        ):
            raise SliceLimitError(obj, f"taint key {taint.key!r} is not a qualified name")
        if len(taint.value or "") > MAX_LABEL_LENGTH or not _LABEL_VALUE.fullmatch(taint.value or ""):
            raise SliceLimitError(obj, f"taint value {taint.value!r} is not a label value")
        if taint.effect not in TAINT_EFFECTS:
            raise SliceLimitError(obj, f"taint effect {taint.effect!r} is not one of {sorted(TAINT_EFFECTS)}")


def validate_slice(rs: V1ResourceSlice, *, inline: bool) -> None:
    """One slice on its own; ``inline`` for the 1.34 layout (counters beside the devices)."""
    name = str(rs.metadata.name if rs.metadata else "")
    obj = f"ResourceSlice {name}"
    if not is_dns_subdomain(name):
        raise SliceLimitError(obj, "name must be a DNS subdomain of at most 253 characters")
    spec = rs.spec
    pool = spec.pool.name
    if len(pool) > MAX_SUBDOMAIN_LENGTH or not all(is_dns_subdomain(p) for p in pool.split("/")):
        raise SliceLimitError(obj, f"pool {pool!r} must be DNS subdomains joined by '/', at most 253")
    devices, sets = spec.devices or [], spec.shared_counters or []
    if devices and sets and not inline:
        raise SliceLimitError(obj, "sharedCounters and devices in one slice (rejected since 1.35)")
    advanced = any(d.consumes_counters or d.taints for d in devices)
    limit = MAX_DEVICES_ADVANCED if advanced else MAX_DEVICES
    if len(devices) > limit:
        raise SliceLimitError(obj, f"{len(devices)} devices, at most {limit}")
    if len(sets) > MAX_COUNTER_SETS:
        raise SliceLimitError(obj, f"{len(sets)} counter sets, at most {MAX_COUNTER_SETS}")
    if len({s.name for s in sets}) != len(sets):
        raise SliceLimitError(obj, "a counter set name appears twice")
    for counter_set in sets:
        validate_counter_set(counter_set)
    for device in devices:
        validate_device(device)
    if inline:
        _validate_inline(obj, rs)


def _validate_inline(obj: str, rs: V1ResourceSlice) -> None:
    sets = {s.name: s.counters for s in rs.spec.shared_counters or []}
    if sum(len(c) for c in sets.values()) > INLINE_MAX_SHARED_COUNTERS:
        raise SliceLimitError(obj, f"more than {INLINE_MAX_SHARED_COUNTERS} shared counters in the slice")
    consumed = 0
    for device in rs.spec.devices or []:
        for use in device.consumes_counters or []:
            if use.counter_set not in sets or not set(use.counters) <= set(sets[use.counter_set]):
                raise SliceLimitError(obj, f"device {device.name} consumes counters not in this slice")
            consumed += len(use.counters)
    if consumed > INLINE_MAX_CONSUMED_COUNTERS:
        raise SliceLimitError(obj, f"{consumed} consumed counters, at most {INLINE_MAX_CONSUMED_COUNTERS}")
