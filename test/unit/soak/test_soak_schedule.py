"""The soak's fault schedule: every kind ``rounds`` times, one at a time, quiet gaps kept."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from soak.faults import durations
from soak.schedule import ScheduleError, Strike, long_plan, plan, rounds_that_fit, smoke_plan

DURATIONS = {"kill-gpu-handler": 0.0, "api-cut": 30.0, "plugin-folder-full": 20.0, "reboot-node": 0.0}


def assert_one_at_a_time(strikes: list[Strike], quiet_gap: float) -> None:
    for before, after in itertools.pairwise(strikes):
        assert after.at >= before.at + before.duration + quiet_gap, (before, after)


def test_every_kind_strikes_rounds_times() -> None:
    strikes = plan(DURATIONS, rounds=3, seconds=1800, quiet_gap=60)

    assert Counter(s.kind for s in strikes) == dict.fromkeys(DURATIONS, 3)


def test_strikes_never_overlap_and_keep_the_quiet_gap() -> None:
    strikes = plan(DURATIONS, rounds=3, seconds=1800, quiet_gap=60)

    assert_one_at_a_time(strikes, quiet_gap=60)
    assert all(s.gap >= 60 for s in strikes)


def test_each_round_strikes_every_kind_before_the_next_round() -> None:
    strikes = plan(DURATIONS, rounds=2, seconds=1800, quiet_gap=60)

    assert {s.kind for s in strikes[:4]} == set(DURATIONS)
    assert {s.kind for s in strikes[4:]} == set(DURATIONS)


def test_spare_time_spreads_the_strikes_over_the_whole_run() -> None:
    strikes = plan(DURATIONS, rounds=2, seconds=1800, quiet_gap=60)

    assert strikes[0].at == 0
    assert strikes[-1].ends == pytest.approx(1800)
    assert strikes[-1].at > 1800 / 2


def test_a_fault_keeps_its_duration() -> None:
    strikes = plan(DURATIONS, rounds=1, seconds=600, quiet_gap=10)

    assert {s.kind: s.duration for s in strikes} == DURATIONS


def test_the_same_seed_gives_the_same_plan_and_another_seed_may_reorder() -> None:
    first = plan(DURATIONS, rounds=4, seconds=3600, quiet_gap=30, seed=1)

    assert plan(DURATIONS, rounds=4, seconds=3600, quiet_gap=30, seed=1) == first
    orders = {
        tuple(s.kind for s in plan(DURATIONS, rounds=4, seconds=3600, quiet_gap=30, seed=n)) for n in range(5)
    }
    assert len(orders) > 1


def test_a_run_too_short_for_the_strikes_is_refused_naming_what_it_needs() -> None:
    # 2 rounds x (50 s of faults + 4 x 60 s of gaps) = 580 s
    with pytest.raises(ScheduleError, match=r"8 strikes .* need 580s .* 300s"):
        plan(DURATIONS, rounds=2, seconds=300, quiet_gap=60)


def test_the_default_30_minute_run_strikes_every_fault_kind_twice() -> None:
    """make soak's defaults (30 minutes, 120 s of warm-up, 60 s gaps, 10 s least): two rounds of
    the 13 kinds need 1700 s with full gaps, 20 s more than the run has; the gaps give way."""
    kinds = durations()
    strikes = long_plan(kinds, seconds=30 * 60 - 120, rounds=None, quiet_gap=60, least_gap=10)
    assert Counter(s.kind for s in strikes) == dict.fromkeys(kinds, 2)
    assert strikes[-1].ends <= 30 * 60 - 120 + 1e-6
    assert 55 < min(s.gap for s in strikes) < 60
    assert_one_at_a_time(strikes, quiet_gap=55)


def test_a_long_run_takes_as_many_rounds_as_fit_with_full_gaps() -> None:
    strikes = long_plan(DURATIONS, seconds=3600, rounds=None, quiet_gap=60, least_gap=10)
    assert Counter(s.kind for s in strikes) == dict.fromkeys(
        DURATIONS, rounds_that_fit(DURATIONS, seconds=3600, quiet_gap=60)
    )
    assert_one_at_a_time(strikes, quiet_gap=60)


def test_a_long_run_whose_rounds_fit_only_below_the_least_gap_is_refused() -> None:
    with pytest.raises(ScheduleError, match="need"):
        # 2 rounds x 50 s of faults leave 50 s for 8 gaps: 6.25 s each, under the least 10 s
        long_plan(DURATIONS, seconds=150, rounds=2, quiet_gap=60, least_gap=10)


def test_zero_rounds_and_no_kinds_are_refused() -> None:
    with pytest.raises(ScheduleError, match="rounds"):
        plan(DURATIONS, rounds=0, seconds=1800, quiet_gap=60)
    with pytest.raises(ScheduleError, match="no fault kinds"):
        plan({}, rounds=1, seconds=1800, quiet_gap=60)


def test_smoke_strikes_each_kind_once_back_to_back() -> None:
    strikes = smoke_plan(DURATIONS, quiet_gap=45)

    assert Counter(s.kind for s in strikes) == dict.fromkeys(DURATIONS, 1)
    assert_one_at_a_time(strikes, quiet_gap=45)
    assert all(s.gap == pytest.approx(45) for s in strikes)


def test_rounds_that_fit() -> None:
    # one round: 50 s of faults + 4 gaps of 60 s = 290 s
    assert rounds_that_fit(DURATIONS, seconds=1800, quiet_gap=60) == 6
    assert rounds_that_fit(DURATIONS, seconds=289, quiet_gap=60) == 0
