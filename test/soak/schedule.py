"""When each fault strikes: ``rounds`` strikes of every kind spread over the run, one at a time.

A strike occupies a *slot*: the fault's own duration (the plugin folder stays full, the node stays
cut off) followed by a quiet gap in which the cluster must recover and the recovery is measured.
Slots never overlap, so a recovery time belongs to one fault alone. Every round strikes each kind
once, in an order shuffled per round (seeded, so a run can be repeated) so that no kind always
follows the same other kind; the time the run has beyond what the slots need is shared out evenly
between the gaps, which spreads the strikes over the whole run instead of bunching them at its
start. The plan is only the earliest time of each strike: the run loop also waits until the
previous strike has recovered (:mod:`soak.run`), so a slow recovery delays what follows rather than
overlapping it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Strike:
    """One planned strike: fault ``kind`` at ``at`` seconds after the warm-up, for ``duration``
    seconds (0: an instant fault such as a kill), then at least ``gap`` seconds of quiet."""

    kind: str
    at: float
    duration: float
    gap: float

    @property
    def ends(self) -> float:
        """When the slot ends: the next strike starts no earlier."""
        return self.at + self.duration + self.gap


class ScheduleError(ValueError):
    """The run cannot hold the strikes asked for."""


def plan(
    durations: Mapping[str, float],
    *,
    rounds: int,
    seconds: float,
    quiet_gap: float,
    seed: int = 0,
) -> list[Strike]:
    """``rounds`` strikes of each kind in ``durations`` (kind -> fault duration, seconds) within
    ``seconds``, each followed by at least ``quiet_gap`` seconds of quiet."""
    if rounds < 1:
        raise ScheduleError(f"rounds must be at least 1, got {rounds}")
    if not durations:
        raise ScheduleError("no fault kinds to schedule")
    bad = sorted(kind for kind, duration in durations.items() if duration < 0)
    if bad:
        raise ScheduleError(f"negative fault duration for {', '.join(bad)}")
    rng = random.Random(seed)
    order: list[str] = []
    for _ in range(rounds):
        kinds = sorted(durations)
        rng.shuffle(kinds)
        order += kinds
    needed = sum(durations[kind] + quiet_gap for kind in order)
    if needed > seconds + 1e-6:  # the gaps long_plan fitted may round up by a hair
        raise ScheduleError(
            f"{len(order)} strikes ({rounds} round(s) of {len(durations)} kinds) need {needed:.0f}s "
            f"of faults and quiet gaps ({quiet_gap:.0f}s each), more than the run's {seconds:.0f}s: "
            "run longer or with fewer rounds"
        )
    gap = quiet_gap + (seconds - needed) / len(order)
    strikes, at = [], 0.0
    for kind in order:
        strike = Strike(kind=kind, at=at, duration=durations[kind], gap=gap)
        strikes.append(strike)
        at = strike.ends
    return strikes


def smoke_plan(durations: Mapping[str, float], *, quiet_gap: float) -> list[Strike]:
    """Each kind once, back to back with the least quiet gap: the short version ``make test`` runs."""
    seconds = sum(duration + quiet_gap for duration in durations.values())
    return plan(durations, rounds=1, seconds=seconds, quiet_gap=quiet_gap)


def long_plan(
    durations: Mapping[str, float],
    *,
    seconds: float,
    rounds: int | None,
    quiet_gap: float,
    least_gap: float,
    seed: int = 0,
) -> list[Strike]:
    """The long run's plan: ``rounds`` rounds, or as many as fit with ``quiet_gap`` after each
    strike and never fewer than two (each fault must strike more than once). Where the rounds do
    not fit with ``quiet_gap``, the gaps shrink to what fits, down to ``least_gap``: the run loop
    waits for each recovery anyway, so a slightly shorter gap costs nothing, while refusing a
    default 30-minute run for want of a minute would."""
    chosen = rounds or max(2, rounds_that_fit(durations, seconds=seconds, quiet_gap=quiet_gap))
    strikes = chosen * len(durations)
    fitting = (seconds - chosen * sum(durations.values())) / strikes if strikes else quiet_gap
    gap = min(quiet_gap, max(fitting, least_gap))
    return plan(durations, rounds=chosen, seconds=seconds, quiet_gap=gap, seed=seed)


def rounds_that_fit(durations: Mapping[str, float], *, seconds: float, quiet_gap: float) -> int:
    """How many rounds of every kind a run of ``seconds`` holds (at least one is asked for)."""
    per_round = sum(duration + quiet_gap for duration in durations.values())
    return int(seconds // per_round) if per_round > 0 else 0
