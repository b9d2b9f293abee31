"""The verdict of an explanation as data: whether the claim is allocatable and, when it is not,
each cause in the user's words with what would change it.

One model rendered three ways (the text report's ``verdict:`` section, ``-o json`` and ``-o
yaml``), so a script reads exactly what a person reads; :meth:`Verdict.to_dict` is the shape both
machine formats print and the ClaimExplanation status stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from api.gpu.v1alpha1 import ExplanationCause, ExplanationFacts
from api.gpu.v1alpha1.claimexplanation import (
    MAX_ATTRIBUTES,
    MAX_CARD_LENGTH,
    MAX_CAUSES,
    MAX_HOLDER_LENGTH,
    MAX_LISTED,
    MAX_TAINT_LENGTH,
    MAX_VALUE_LENGTH,
)
from api.gpu.v1alpha1.common import ApiModel

RETRY_NOTE = "retry when capacity changes"
NO_RETRY_NOTE = "waiting will not help: the claim or its class must change"


class CauseKind(StrEnum):
    """Why a request cannot get its devices; the values are what ``-o json`` prints."""

    TOO_FEW = "TooFewDevices"  # more asked than exist in the cluster or on one node
    NO_MATCH = "NoDeviceMatches"  # a selector no device satisfies
    HELD = "HeldByOthers"  # the devices are allocated to other claims
    OTHER_MODE = "CardUsedByAnotherMode"  # the card's capacity is taken by devices of another kind
    TAINTED = "Tainted"  # a taint the request does not tolerate
    TOO_LARGE = "RequestExceedsDevice"  # the capacity asked is more than a device offers
    POOL_UNAVAILABLE = "PoolUnavailable"  # a pool is being republished or invalid
    CONSTRAINT = "ConstraintSplitsDevices"  # matchAttribute/distinctAttribute: no value serves all
    TOGETHER = "RequestsCompete"  # each request fits alone, not all together
    INVALID = "ClaimInvalid"  # the claim or its class is broken (a selector that does not compile...)


@dataclass(frozen=True)
class Facts:
    """The numbers and names behind a cause's sentence, for scripts; each kind fills its own."""

    asked: int | None = None  # devices the request asks for
    matching: int | None = None  # devices in the cluster that match the request's selectors
    most_on_one_node: int | None = None  # of those, the most on one node
    node: str | None = None  # that node
    free_on_one_node: int | None = None  # the most that are free on one node
    selector: str | None = None  # the selector no device satisfies
    owner: str | None = None  # whose selector it is: class X or claim ns/name
    values: dict[str, list[str]] = field(default_factory=dict)  # attribute -> values that exist
    blocked: int | None = None  # matching devices this cause keeps from the request
    holders: tuple[str, ...] = ()  # claims (namespace/name) named as holding them
    hidden_holders: int = 0  # claims holding them that the caller may not read
    cards: tuple[str, ...] = ()  # cards used by devices of another mode
    taints: tuple[str, ...] = ()  # key=value:Effect, with since when
    constraint: str | None = None  # matchAttribute | distinctAttribute
    attribute: str | None = None  # the constraint's attribute
    problem: str | None = None  # what is broken in the claim or class

    def to_dict(self) -> dict[str, Any]:
        """Only the facts set, in camelCase (the ClaimExplanation status's field names)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value in ((), {}) or (f.name == "hidden_holders" and not value):
                continue
            head, *rest = f.name.split("_")
            out[head + "".join(w.title() for w in rest)] = list(value) if isinstance(value, tuple) else value
        return out

    def with_(self, **changes: Any) -> Facts:
        return replace(self, **changes)


@dataclass(frozen=True)
class Cause:
    """One cause: ``text`` says what is wrong, ``remedy`` what would change it, ``retry`` whether a
    change of capacity (a device freed, added or untainted) would; ``facts`` are the numbers and
    names behind the sentence, for scripts."""

    kind: str  # a CauseKind's value (a str: an answer from a newer controller may carry a new one)
    request: str | None
    text: str
    remedy: str
    retry: bool
    facts: Facts = field(default_factory=Facts)

    def line(self) -> str:
        """The cause as the verdict and the ``AllocationFailed`` Event say it: its request, then why."""
        return f"request {self.request}: {self.text}" if self.request else self.text

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": str(self.kind),
            "request": self.request,
            "text": self.text,
            "remedy": self.remedy,
            "retry": self.retry,
            "facts": self.facts.to_dict(),
        }


@dataclass(frozen=True)
class Verdict:
    """``causes`` is empty for an allocatable claim; a pending one has at least one."""

    allocatable: bool
    causes: tuple[Cause, ...] = ()

    @property
    def retry(self) -> bool:
        """Whether waiting for capacity to change may help: some cause says so."""
        return any(c.retry for c in self.causes)

    def to_dict(self) -> dict[str, object]:
        return {
            "allocatable": self.allocatable,
            "retry": self.retry,
            "causes": [c.to_dict() for c in self.causes],
        }

    def lines(self) -> list[str]:
        """The report's first section: the causes first, then what would change each (none for
        an allocatable claim: the report's result line says what it gets)."""
        if self.allocatable:
            return []
        lines = ["verdict: NOT allocatable"]
        for cause in self.causes:
            lines.append(f"  cause: {cause.line()}")
            lines.append(f"    would change it: {cause.remedy}")
        lines.append(f"  {RETRY_NOTE if self.retry else NO_RETRY_NOTE}")
        return lines


def to_status(verdict: Verdict) -> list[ExplanationCause]:
    """The causes as the ClaimExplanation status stores them (the same camelCase fields), clipped
    to the schema's bounds so that the write never fails validation: a long string ends with
    ``…``, a long list keeps its first items and ends with ``and N more``."""
    return [ExplanationCause.model_validate(_stored(c)) for c in verdict.causes[:MAX_CAUSES]]


def _stored(cause: Cause) -> dict[str, Any]:
    data = _fit(ExplanationCause, cause.to_dict())
    data["facts"] = _fit(ExplanationFacts, cause.facts.to_dict())
    for name, item_limit in _ITEM_LIMITS.items():
        if name in data["facts"]:
            data["facts"][name] = _clip_list(data["facts"][name], MAX_LISTED, item_limit)
    if "values" in data["facts"]:
        data["facts"]["values"] = {
            attribute: _clip_list(values, MAX_LISTED, MAX_VALUE_LENGTH)
            for attribute, values in list(data["facts"]["values"].items())[:MAX_ATTRIBUTES]
        }
    return data


_ITEM_LIMITS = {"holders": MAX_HOLDER_LENGTH, "cards": MAX_CARD_LENGTH, "taints": MAX_TAINT_LENGTH}


def _fit(model: type[ApiModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each string cut to its field's ``max_length`` in ``model`` (the bound the
    CRD is generated from, so the two cannot drift)."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        value = data.get(key)
        limit = next((m.max_length for m in info.metadata if hasattr(m, "max_length")), None)
        if isinstance(value, str) and limit is not None:
            data[key] = _clip(value, limit)
    return data


def _clip_list(items: list[str], max_items: int, max_length: int) -> list[str]:
    clipped = [_clip(item, max_length) for item in items]
    if len(clipped) <= max_items:
        return clipped
    return [*clipped[: max_items - 1], f"and {len(clipped) - max_items + 1} more"]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def from_status(allocatable: bool, causes: list[ExplanationCause] | None) -> Verdict:
    """The verdict a ClaimExplanation status carries (none stored: an older controller's answer)."""
    return Verdict(allocatable, tuple(_cause(c) for c in causes or ()))


def _cause(stored: ExplanationCause) -> Cause:
    facts = stored.facts or ExplanationFacts()
    return Cause(
        stored.kind,
        stored.request,
        stored.text,
        stored.remedy,
        retry=stored.retry,
        facts=_facts(facts),
    )


def _facts(stored: ExplanationFacts) -> Facts:
    kept: dict[str, Any] = {}
    for f in fields(Facts):
        value = getattr(stored, f.name)
        if value is not None:
            kept[f.name] = tuple(value) if isinstance(value, list) else value
    return Facts(**kept)
