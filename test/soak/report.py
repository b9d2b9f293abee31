"""The soak's report: a printed table and ``test-artifacts/soak-report.json``.

What a reader needs to judge a run, and nothing the run could not measure from outside our code:
per fault kind how often it struck and how long the cluster took to recover (p50 and max, from the
heal — or the strike, for an instant fault — until every Pod that fits runs and no leak persists);
the Pods the workload started, completed and lost; the violations of each invariant; each
component's restarts (those the soak caused by killing it apart from those it did on its own) and
its resident memory after the warm-up and at the end. Every violation carries the events around
it and the tail of the involved components' logs, so it can be debugged from the report alone.

p50 is the nearest-rank median (a recovery time that was really observed, not an average of two).
A strike that did not recover within the bound counts in ``unrecovered`` and is left out of the
times, which would otherwise hide it behind a number.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The invariants' violation kinds (soak.invariants.Violation.kind), in the order the report names them.
VIOLATION_KINDS = (
    "DoubleAllocation",
    "BadAllocation",
    "Leak",
    "Unrecovered",
    "LostPod",
    "RestartLoop",
    "MemoryGrowth",
)


@dataclass(frozen=True)
class StrikeResult:
    """One strike as it happened. Times are seconds since the run started."""

    kind: str
    target: str  # what was struck: a component, a node, a card
    struck_at: float
    healed_at: float  # == struck_at for an instant fault
    recovery: float | None  # seconds from the heal until recovered; None: not within the bound
    error: str | None = None  # the strike or heal itself failed (a primitive missing, a timeout)


@dataclass(frozen=True)
class Finding:
    """A violation with what is needed to debug it."""

    kind: str
    message: str
    at: float  # seconds since the run started
    events: str = ""  # the cluster's events within +-30 s
    logs: Mapping[str, str] = field(default_factory=dict)  # component -> the tail of its log


@dataclass(frozen=True)
class ComponentFigures:
    name: str
    restarts_ours: int  # the soak killed it
    restarts_own: int  # it exited on its own
    rss_start: int | None  # bytes, after the warm-up
    rss_end: int | None


@dataclass(frozen=True)
class PodFigures:
    started: int
    completed: int
    lost: int  # failed, vanished or stuck with nothing that explains it (soak.casualties)
    lost_why: Mapping[str, int] = field(default_factory=dict)
    killed: int = 0  # ended by a fault's nature: a reboot's killed containers, a lost card's evictions
    killed_by: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SoakResult:
    started: str  # UTC, as printed
    seconds: float
    rate: float  # Pods per minute offered
    smoke: bool
    strikes: Sequence[StrikeResult]
    pods: PodFigures
    components: Sequence[ComponentFigures]
    findings: Sequence[Finding]

    @property
    def passed(self) -> bool:
        return not self.findings and not any(s.error for s in self.strikes)


@dataclass(frozen=True)
class FaultRow:
    kind: str
    strikes: int
    recovered: int
    unrecovered: int
    failed: int  # the strike or heal raised
    p50: float | None
    max: float | None


def started_per_minute(result: SoakResult) -> float:
    """The rate achieved, over the whole run (warm-up and drain included): below the rate asked
    when the cards cannot hold it."""
    return result.pods.started * 60.0 / result.seconds if result.seconds > 0 else 0.0


def p50(values: Sequence[float]) -> float | None:
    """Nearest-rank median: the smallest value with at least half the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[math.ceil(0.5 * len(ordered)) - 1]


def fault_rows(strikes: Iterable[StrikeResult]) -> list[FaultRow]:
    by_kind: dict[str, list[StrikeResult]] = {}
    for strike in strikes:
        by_kind.setdefault(strike.kind, []).append(strike)
    rows = []
    for kind in sorted(by_kind):
        done = by_kind[kind]
        times = [s.recovery for s in done if s.recovery is not None and s.error is None]
        rows.append(
            FaultRow(
                kind=kind,
                strikes=len(done),
                recovered=len(times),
                unrecovered=sum(1 for s in done if s.recovery is None and s.error is None),
                failed=sum(1 for s in done if s.error is not None),
                p50=p50(times),
                max=max(times) if times else None,
            )
        )
    return rows


def violation_counts(findings: Iterable[Finding]) -> dict[str, int]:
    """Every known kind (0 when none), then any other kind a finding names."""
    counted = Counter(f.kind for f in findings)
    return {kind: counted.get(kind, 0) for kind in VIOLATION_KINDS} | {
        kind: n for kind, n in sorted(counted.items()) if kind not in VIOLATION_KINDS
    }


def to_json(result: SoakResult) -> dict[str, Any]:
    return {
        "started": result.started,
        "seconds": round(result.seconds, 1),
        "rate": result.rate,
        "started_per_minute": round(started_per_minute(result), 1),
        "smoke": result.smoke,
        "passed": result.passed,
        "faults": [asdict(row) for row in fault_rows(result.strikes)],
        "strikes": [asdict(s) for s in result.strikes],
        "pods": {
            **asdict(result.pods),
            "lost_why": dict(result.pods.lost_why),
            "killed_by": dict(result.pods.killed_by),
        },
        "violations": violation_counts(result.findings),
        "components": [asdict(c) for c in result.components],
        "findings": [{**asdict(f), "logs": dict(f.logs)} for f in result.findings],
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f} MiB"


def render(result: SoakResult) -> str:
    """The printed report: faults, Pods, violations, components, then every finding in full."""
    mode = "smoke" if result.smoke else "soak"
    lines = [
        f"{mode} started {result.started}, ran {result.seconds / 60:.1f} min at {result.rate:g} Pods/min: "
        + ("PASSED" if result.passed else "FAILED"),
        "",
        f"{'fault':<24} {'strikes':>7} {'recovered':>9} {'unrecovered':>11} {'failed':>6} "
        f"{'p50':>8} {'max':>8}",
    ]
    for row in fault_rows(result.strikes):
        lines.append(
            f"{row.kind:<24} {row.strikes:>7} {row.recovered:>9} {row.unrecovered:>11} {row.failed:>6} "
            f"{_seconds(row.p50):>8} {_seconds(row.max):>8}"
        )
    pods = result.pods
    why = ", ".join(f"{reason} {n}" for reason, n in sorted(pods.lost_why.items()))
    killers = ", ".join(f"{kind} {n}" for kind, n in sorted(pods.killed_by.items()))
    lines += [
        "",
        f"Pods: started {pods.started} ({started_per_minute(result):.1f}/min), completed {pods.completed}, "
        f"killed by their fault {pods.killed}"
        + (f" ({killers})" if killers else "")
        + f", lost {pods.lost}"
        + (f" ({why})" if why else ""),
    ]
    counts = violation_counts(result.findings)
    lines.append("violations: " + ", ".join(f"{kind} {n}" for kind, n in counts.items()))
    lines += ["", f"{'component':<34} {'restarts ours':>13} {'own':>5} {'RSS start':>10} {'RSS end':>10}"]
    for c in result.components:
        lines.append(
            f"{c.name:<34} {c.restarts_ours:>13} {c.restarts_own:>5} "
            f"{_mib(c.rss_start):>10} {_mib(c.rss_end):>10}"
        )
    for s in result.strikes:
        if s.error:
            lines += ["", f"strike {s.kind} on {s.target} at {s.struck_at:.0f}s failed: {s.error}"]
    for f in result.findings:
        lines += ["", f"[{f.kind}] at {f.at:.0f}s: {f.message}"]
        if f.events:
            lines += ["  events around it:", *(f"    {line}" for line in f.events.splitlines())]
        for name, tail in f.logs.items():
            lines += [f"  last lines of {name}:", *(f"    {line}" for line in tail.splitlines())]
    return "\n".join(lines)


def write(result: SoakResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(result), indent=2) + "\n")
