"""Status conditions with Kubernetes semantics, over the client's ``V1Condition``.

Conditions are how our objects report state to users and to other controllers, so every
controller must treat them alike (one model of statuses and reasons for every object). The rules are
those of apimachinery's ``meta.SetStatusCondition``:

* ``lastTransitionTime`` moves only when ``status`` changes. It answers "since when is this
  True?"; bumping it when only the reason or message changes would make it meaningless.
* ``reason``, ``message`` and ``observedGeneration`` are updated in place.
* :func:`set_condition` reports whether anything changed, so a reconciler that recomputes the
  same conditions every pass skips the status write (no write amplification, no watch events
  that wake up every other watcher).
* A missing condition is ``Unknown``: before a controller has looked, nothing is known.

Timestamps are timezone-aware UTC truncated to whole seconds, because the API server stores
RFC 3339 with second precision: a microsecond we keep locally would differ from what we read back
and look like a change. Naive datetimes are rejected rather than guessed at.

Handlers say what they want with :class:`DesiredCondition` (type and reason are usually members
of a per-controller ``StrEnum``); the time is stamped by :func:`set_condition`, which alone knows
whether a transition happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum, StrEnum

from kubernetes.client import V1Condition
from pydantic import BaseModel, ConfigDict, Field, field_validator


class ConditionStatus(StrEnum):
    """The three values of ``condition.status``."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"

    @classmethod
    def of(cls, value: bool | None) -> ConditionStatus:
        """``True``/``False`` for a known boolean, ``Unknown`` for ``None``."""
        if value is None:
            return cls.UNKNOWN
        return cls.TRUE if value else cls.FALSE


def normalize_time(value: datetime) -> datetime:
    """Return ``value`` in UTC truncated to seconds, as the API server would store it."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"condition time must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC).replace(microsecond=0)


def now_utc() -> datetime:
    """The current time, normalized like every condition timestamp."""
    return normalize_time(datetime.now(UTC))


class DesiredCondition(BaseModel):
    """A condition as a handler wants it, without ``lastTransitionTime`` (set_condition owns it).

    ``type`` and ``reason`` accept members of a ``str`` enum and store their plain values, so the
    API never sees an enum's repr.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str = Field(min_length=1)
    status: ConditionStatus
    reason: str = Field(min_length=1)
    message: str = ""
    observed_generation: int | None = Field(default=None, ge=0)

    @field_validator("type", "reason", mode="before")
    @classmethod
    def _plain_value(cls, value: object) -> object:
        return value.value if isinstance(value, Enum) else value

    def to_condition(self, *, now: datetime | None = None) -> V1Condition:
        """A new ``V1Condition`` that transitioned at ``now`` (default: the current time)."""
        return V1Condition(
            type=self.type,
            status=self.status.value,
            reason=self.reason,
            message=self.message,
            observed_generation=self.observed_generation,
            last_transition_time=now_utc() if now is None else normalize_time(now),
        )


def find_condition(conditions: Sequence[V1Condition] | None, condition_type: str) -> V1Condition | None:
    """The condition of ``condition_type``, or ``None``; ``conditions`` may be an unset status."""
    return next((c for c in conditions or () if c.type == condition_type), None)


def set_condition(
    conditions: list[V1Condition],
    new: V1Condition | DesiredCondition,
    *,
    now: datetime | None = None,
) -> bool:
    """Add or update ``new`` in ``conditions`` in place; return whether anything changed.

    The transition time of an added condition, or of one whose status changed, is ``now``
    (default: the current time) for a :class:`DesiredCondition`, and the condition's own
    ``last_transition_time`` for a ``V1Condition`` (as a non-zero time in apimachinery).
    Otherwise the existing ``lastTransitionTime`` is kept.
    """
    if isinstance(new, DesiredCondition):
        new = new.to_condition(now=now)
    transition_time = normalize_time(new.last_transition_time)
    existing = find_condition(conditions, new.type)
    if existing is None:
        # A copy: the caller's object must not alias an element of the status it will write.
        conditions.append(new.model_copy(update={"last_transition_time": transition_time}))
        return True
    changed = False
    if existing.status != new.status:
        existing.status = new.status
        existing.last_transition_time = transition_time
        changed = True
    if existing.reason != new.reason:
        existing.reason = new.reason
        changed = True
    if existing.message != new.message:
        existing.message = new.message
        changed = True
    if existing.observed_generation != new.observed_generation:
        existing.observed_generation = new.observed_generation
        changed = True
    return changed


def condition_status(conditions: Sequence[V1Condition] | None, condition_type: str) -> ConditionStatus:
    """The status of ``condition_type``; missing (or an unrecognized value) is ``Unknown``."""
    found = find_condition(conditions, condition_type)
    try:
        return ConditionStatus(found.status) if found is not None else ConditionStatus.UNKNOWN
    except ValueError:  # the API server validates status, but a hand-built object might not
        return ConditionStatus.UNKNOWN


def is_true(conditions: Sequence[V1Condition] | None, condition_type: str) -> bool:
    """Whether ``condition_type`` is present with status ``True``."""
    return condition_status(conditions, condition_type) is ConditionStatus.TRUE


def conditions_equal(a: Sequence[V1Condition] | None, b: Sequence[V1Condition] | None) -> bool:
    """Whether two condition lists say the same thing, ignoring order and ``lastTransitionTime``.

    For tests and for "would this status write change anything" checks: transition times differ
    between any two computations of the same state and are not part of what a condition means.
    """
    return sorted(map(_meaning, a or ())) == sorted(map(_meaning, b or ()))


def _meaning(c: V1Condition) -> tuple[str, str, str, str, int]:
    # -1 stands in for "no observedGeneration" so tuples stay sortable; generations are >= 0.
    generation = -1 if c.observed_generation is None else c.observed_generation
    return (c.type, c.status, c.reason, c.message, generation)
