"""Conditions: apimachinery SetStatusCondition semantics over V1Condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum

import pytest
from kubernetes.client import V1Condition
from pydantic import ValidationError

from pkg.framework.reconcile.conditions import (
    ConditionStatus,
    DesiredCondition,
    condition_status,
    conditions_equal,
    find_condition,
    is_true,
    normalize_time,
    now_utc,
    set_condition,
)

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


class Type(StrEnum):
    READY = "Ready"
    PREPARED = "Prepared"


class Reason(StrEnum):
    DRIVER_READY = "DriverReady"
    DRIVER_STARTING = "DriverStarting"
    DRIVER_FAILED = "DriverFailed"


def ready(
    status: ConditionStatus, reason: Reason, message: str = "", generation: int | None = 1
) -> DesiredCondition:
    return DesiredCondition(
        type=Type.READY, status=status, reason=reason, message=message, observed_generation=generation
    )


def test_new_condition_is_added_with_now_truncated_to_seconds() -> None:
    conditions: list[V1Condition] = []
    now = T0.replace(microsecond=987654)

    assert set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=now)

    (c,) = conditions
    assert (c.type, c.status, c.reason, c.observed_generation) == ("Ready", "True", "DriverReady", 1)
    assert c.last_transition_time == T0
    assert c.last_transition_time.tzinfo is not None


def test_enum_members_are_stored_as_plain_strings() -> None:
    conditions: list[V1Condition] = []
    set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=T0)
    assert type(conditions[0].type) is str
    assert type(conditions[0].reason) is str
    assert conditions[0].to_dict(serialize=True)["reason"] == "DriverReady"


def test_setting_the_same_condition_again_is_no_change() -> None:
    conditions: list[V1Condition] = []
    set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY, "ok"), now=T0)

    assert not set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY, "ok"), now=T1)
    assert conditions[0].last_transition_time == T0


def test_reason_message_generation_change_keeps_transition_time() -> None:
    conditions: list[V1Condition] = []
    set_condition(conditions, ready(ConditionStatus.FALSE, Reason.DRIVER_STARTING), now=T0)

    changed = set_condition(
        conditions, ready(ConditionStatus.FALSE, Reason.DRIVER_FAILED, "crash loop", generation=2), now=T1
    )

    assert changed
    (c,) = conditions
    assert (c.status, c.reason, c.message, c.observed_generation) == (
        "False",
        "DriverFailed",
        "crash loop",
        2,
    )
    assert c.last_transition_time == T0


def test_status_change_moves_transition_time() -> None:
    conditions: list[V1Condition] = []
    set_condition(conditions, ready(ConditionStatus.FALSE, Reason.DRIVER_STARTING), now=T0)

    assert set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=T1)
    assert conditions[0].status == "True"
    assert conditions[0].last_transition_time == T1


def test_other_conditions_are_untouched() -> None:
    conditions: list[V1Condition] = []
    set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=T0)
    prepared = DesiredCondition(type=Type.PREPARED, status=ConditionStatus.FALSE, reason="Pending")

    assert set_condition(conditions, prepared, now=T1)
    assert [c.type for c in conditions] == ["Ready", "Prepared"]
    assert conditions[0].last_transition_time == T0


def test_v1condition_input_brings_its_own_transition_time_and_is_copied() -> None:
    given = V1Condition(
        type="Ready", status="True", reason="DriverReady", message="", last_transition_time=T0
    )
    conditions: list[V1Condition] = []

    assert set_condition(conditions, given, now=T1)
    assert conditions[0].last_transition_time == T0
    given.reason = "Mutated"
    assert conditions[0].reason == "DriverReady"

    flipped = V1Condition(type="Ready", status="False", reason="Lost", message="", last_transition_time=T1)
    assert set_condition(conditions, flipped)
    assert conditions[0].last_transition_time == T1


def test_default_now_is_current_utc_seconds() -> None:
    conditions: list[V1Condition] = []
    before = now_utc()
    set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY))
    after = now_utc()
    ltt = conditions[0].last_transition_time
    assert before <= ltt <= after
    assert ltt.microsecond == 0
    assert ltt.utcoffset() == timedelta(0)


def test_times_are_normalized_to_utc_and_naive_is_rejected() -> None:
    plus3 = timezone(timedelta(hours=3))
    assert normalize_time(datetime(2025, 1, 1, 15, 0, 0, 500, tzinfo=plus3)) == T0
    assert normalize_time(datetime(2025, 1, 1, 15, 0, 0, tzinfo=plus3)).tzinfo is UTC
    with pytest.raises(ValueError, match="timezone-aware"):
        set_condition([], ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=datetime(2025, 1, 1))


def test_missing_condition_is_unknown() -> None:
    assert condition_status([], Type.READY) is ConditionStatus.UNKNOWN
    assert condition_status(None, Type.READY) is ConditionStatus.UNKNOWN
    assert not is_true(None, Type.READY)
    assert find_condition(None, Type.READY) is None


def test_status_predicates() -> None:
    conditions: list[V1Condition] = []
    set_condition(conditions, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=T0)
    set_condition(
        conditions, DesiredCondition(type="Prepared", status=ConditionStatus.FALSE, reason="Pending"), now=T0
    )
    assert is_true(conditions, Type.READY)
    assert condition_status(conditions, "Prepared") is ConditionStatus.FALSE
    assert not is_true(conditions, "Prepared")

    set_condition(conditions, ready(ConditionStatus.UNKNOWN, Reason.DRIVER_STARTING), now=T1)
    assert condition_status(conditions, Type.READY) is ConditionStatus.UNKNOWN
    assert not is_true(conditions, Type.READY)


def test_unrecognized_status_counts_as_unknown() -> None:
    odd = V1Condition(type="Ready", status="Maybe", reason="X", message="", last_transition_time=T0)
    assert condition_status([odd], "Ready") is ConditionStatus.UNKNOWN


def test_conditions_equal_ignores_transition_time_and_order() -> None:
    a: list[V1Condition] = []
    b: list[V1Condition] = []
    prepared = DesiredCondition(type=Type.PREPARED, status=ConditionStatus.FALSE, reason="Pending")
    set_condition(a, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=T0)
    set_condition(a, prepared, now=T0)
    set_condition(b, prepared, now=T1)
    set_condition(b, ready(ConditionStatus.TRUE, Reason.DRIVER_READY), now=T1)

    assert conditions_equal(a, b)
    assert conditions_equal(None, [])
    set_condition(b, ready(ConditionStatus.TRUE, Reason.DRIVER_READY, "new message"), now=T1)
    assert not conditions_equal(a, b)
    assert not conditions_equal(a, a[:1])


def test_condition_status_of_bool() -> None:
    assert ConditionStatus.of(True) is ConditionStatus.TRUE
    assert ConditionStatus.of(False) is ConditionStatus.FALSE
    assert ConditionStatus.of(None) is ConditionStatus.UNKNOWN


def test_desired_condition_validates() -> None:
    with pytest.raises(ValidationError):
        DesiredCondition(type=Type.READY, status=ConditionStatus.TRUE, reason="")
    with pytest.raises(ValidationError):
        DesiredCondition(type="", status=ConditionStatus.TRUE, reason="R")
    with pytest.raises(ValidationError):
        DesiredCondition(type="Ready", status="Yes", reason="R")
    desired = ready(ConditionStatus.TRUE, Reason.DRIVER_READY)
    assert desired.to_condition(now=T0).last_transition_time == T0
