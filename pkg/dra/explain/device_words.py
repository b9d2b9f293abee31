"""Devices and the claims that hold them, in the words a user of the cluster uses.

A verdict says "the MPS share of Pod user/train (50%)" or "3 MIG devices", not
``driver/pool/device`` or "counter copy-engines of counter set gpu-0000-d8-00-0": the kind of a
device comes from our published attributes (``deviceType``, ``sharingStrategy``, ``migProfile``),
a holder from the claim's allocation and ``status.reservedFor``. A holder in a namespace the
caller may not read is counted, never named (the controller answers users of one namespace).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubernetes.client import ResourceV1ResourceClaim, V1DeviceAttribute

from api.gpu.v1alpha1 import DeviceType, SharingStrategy
from pkg.dra.allocator.pools import Candidate
from pkg.dra.model import DeviceID

HIDDEN = "claims you cannot read"  # "held by claims you cannot read"
Readable = Callable[[str], bool]
"""Whether the caller may read the claims of a namespace (their names are said only then)."""
_SHARED = {s.value.lower(): s.value for s in SharingStrategy if s is not SharingStrategy.EXCLUSIVE}


def attribute(cand: Candidate, domain: str, name: str) -> str | None:
    """The value of ``device.attributes[domain].name`` as CEL sees it: the qualified key, or the
    bare one when the domain is the device's driver."""
    attrs = cand.device.attributes or {}
    value = attrs.get(f"{domain}/{name}")
    if value is None and domain == cand.pool.id.driver:
        value = attrs.get(name)
    return None if value is None else attribute_text(value)


def attribute_text(value: V1DeviceAttribute) -> str:
    for field in (value.string, value.int, value.bool, value.version):
        if field is not None:
            return str(field).lower() if isinstance(field, bool) else str(field)
    return ""


def mode_of(cand: Candidate) -> str:
    """The way a device uses its card, as its attributes say: ``whole card``, a sharing strategy
    (``TimeSlicing``), or its ``deviceType`` (a card's partitions) — two devices of different
    modes cannot share a card. Words come from the attribute values, so no vendor is named here."""
    driver = cand.pool.id.driver
    kind = attribute(cand, driver, "deviceType") or ""
    if kind == DeviceType.PHYSICAL.value or (not kind and cand.shared):
        sharing = attribute(cand, driver, "sharingStrategy") or attribute(cand, driver, "sharing") or ""
        return _SHARED.get(sharing.lower(), "share" if cand.shared else "whole card")
    return kind or "device"


def whole_card(cand: Candidate) -> bool:
    """Whether the device is the whole card (alone or shared), not a part of it."""
    return mode_of(cand) in ("whole card", "share", *_SHARED.values())


def noun(cand: Candidate) -> str:
    """One device in words: ``whole card``, ``<deviceType> <profile> device``, ``<strategy> share``."""
    mode = mode_of(cand)
    profile = attribute(cand, cand.pool.id.driver, "migProfile")
    if profile:
        return f"{mode} {profile} device"
    if mode in _SHARED.values():
        return f"{mode} share"
    if mode in ("whole card", "share", "device"):
        return mode
    return f"{mode} device"


def plural(word: str, n: int) -> str:
    """``n`` things in words (``1 whole card``, ``3 whole cards``, ``2 devices of class x``): the one
    count wording of every explain sentence, so none says "1 devices" or "device(s)"."""
    return f"{n} {word if n == 1 else plural_form(word)}"


def plural_form(word: str) -> str:
    """The plural of a noun phrase: its head noun takes the ``s`` (``device of class x`` ->
    ``devices of class x``); our nouns are regular."""
    head, of, rest = word.partition(" of ")
    return f"{head}s{of}{rest}"


def are(n: int) -> str:
    return "is" if n == 1 else "are"


def card_of(cand: Candidate) -> str:
    """The card a device sits on: its counter set (named like the card), else its own name."""
    if cand.card:
        return cand.card
    return cand.consumes[0][0] if cand.consumes else cand.device.name


@dataclass(frozen=True)
class Holding:
    """One claim's hold on one device: the claim, and its share's consumed capacity if a share."""

    claim: ResourceV1ResourceClaim
    share_percent: str | None = None
    memory: str | None = None


def holdings(
    claims: Iterable[ResourceV1ResourceClaim], devices: set[DeviceID]
) -> dict[DeviceID, list[Holding]]:
    """Who holds each of ``devices`` (admin access holds nothing, as in the allocator)."""
    held: dict[DeviceID, list[Holding]] = {}
    if not devices:
        return held
    for claim in claims:
        allocation = claim.status.allocation if claim.status is not None else None
        results = allocation.devices.results if allocation is not None and allocation.devices else None
        for result in results or ():
            device = DeviceID(result.driver, result.pool, result.device)
            if result.admin_access or device not in devices:
                continue
            consumed = result.consumed_capacity or {}
            memory = consumed.get("memory")
            held.setdefault(device, []).append(
                Holding(claim, consumed.get("sharePercent"), None if memory in (None, "0") else memory)
            )
    return held


def holder_text(holding: Holding, what: str) -> str:
    """``the MPS share (50%, 4Gi) of Pod user/train (claim user/train-gpu)``."""
    claim = holding.claim
    meta = claim.metadata
    namespace, name = (meta.namespace or "", meta.name or "") if meta is not None else ("", "")
    pods = [
        r.name
        for r in (claim.status.reserved_for if claim.status is not None else None) or ()
        if r.resource == "pods" and r.name
    ]
    limits = ", ".join(
        x for x in (f"{holding.share_percent}%" if holding.share_percent else None, holding.memory) if x
    )
    what = f"{what} ({limits})" if limits else what
    if pods:
        return f"the {what} of Pod {namespace}/{pods[0]} (claim {namespace}/{name})"
    return f"the {what} of claim {namespace}/{name}"


def holders_text(
    holds: Iterable[tuple[Holding, str]], *, readable: Readable, limit: int = 3
) -> tuple[str, list[str], int]:
    """The holders in one phrase, the claims named (``namespace/name``) and how many were hidden."""
    named: dict[str, str] = {}
    hidden: set[str] = set()
    for holding, what in holds:
        meta = holding.claim.metadata
        key = f"{meta.namespace}/{meta.name}" if meta is not None else "?"
        if meta is not None and readable(meta.namespace or ""):
            named.setdefault(key, holder_text(holding, what))
        else:
            hidden.add(key)
    parts = list(named.values())[:limit]
    if len(named) > limit:
        parts.append(plural("more claim", len(named) - limit))
    if hidden:
        parts.append(HIDDEN if not named else f"{plural('claim', len(hidden))} you cannot read")
    return ", ".join(parts) or "other claims", sorted(named), len(hidden)
