"""The soak's report from hand-made results: per-fault figures, the table and the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from soak.report import (
    ComponentFigures,
    Finding,
    PodFigures,
    SoakResult,
    StrikeResult,
    fault_rows,
    p50,
    render,
    to_json,
    write,
)


def strike(kind: str, recovery: float | None, *, error: str | None = None) -> StrikeResult:
    return StrikeResult(
        kind=kind, target="node-a", struck_at=10, healed_at=30, recovery=recovery, error=error
    )


def result(*, strikes: list[StrikeResult], findings: list[Finding] | None = None) -> SoakResult:
    return SoakResult(
        started="2026-01-01 10:00 UTC",
        seconds=1800,
        rate=60,
        smoke=False,
        strikes=strikes,
        pods=PodFigures(started=120, completed=117, lost=3, lost_why={"evicted": 2, "failed": 1}),
        components=[
            ComponentFigures(
                "gpu-handler[node-a]",
                restarts_ours=2,
                restarts_own=1,
                rss_start=80 * 2**20,
                rss_end=82 * 2**20,
            ),
            ComponentFigures("gpu-controller", restarts_ours=0, restarts_own=0, rss_start=None, rss_end=None),
        ],
        findings=findings or [],
    )


LEAK = Finding(
    kind="Leak",
    message="MIG device gi1 on node-a owned by claim ns/c (uid u1), which is not allocated there",
    at=612,
    events="12:00:01 Normal Scheduled pod/x",
    logs={"gpu-handler[node-a]": "line one\nline two"},
)


def test_p50_is_an_observed_value() -> None:
    assert p50([4.0, 1.0, 3.0, 2.0]) == 2.0
    assert p50([5.0, 1.0, 3.0]) == 3.0
    assert p50([7.0]) == 7.0
    assert p50([]) is None


def test_fault_rows_count_strikes_and_time_only_recovered_ones() -> None:
    rows = fault_rows(
        [
            strike("reboot-node", 40.0),
            strike("reboot-node", 20.0),
            strike("reboot-node", 90.0),
            strike("reboot-node", None),
            strike("reboot-node", None, error="primitive missing: RealNode.reboot"),
            strike("api-cut", 5.0),
        ]
    )

    assert [r.kind for r in rows] == ["api-cut", "reboot-node"]
    reboot = rows[1]
    assert (reboot.strikes, reboot.recovered, reboot.unrecovered, reboot.failed) == (5, 3, 1, 1)
    assert (reboot.p50, reboot.max) == (40.0, 90.0)


def test_a_kind_that_never_recovered_has_no_times() -> None:
    (row,) = fault_rows([strike("etcd-restart", None)])

    assert (row.p50, row.max, row.unrecovered) == (None, None, 1)


def test_json_holds_every_figure() -> None:
    doc = to_json(result(strikes=[strike("api-cut", 4.0), strike("api-cut", 8.0)], findings=[LEAK]))

    assert doc["passed"] is False
    assert doc["faults"] == [
        {
            "kind": "api-cut",
            "strikes": 2,
            "recovered": 2,
            "unrecovered": 0,
            "failed": 0,
            "p50": 4.0,
            "max": 8.0,
        }
    ]
    assert doc["pods"] == {
        "started": 120,
        "completed": 117,
        "lost": 3,
        "lost_why": {"evicted": 2, "failed": 1},
        "killed": 0,
        "killed_by": {},
    }
    assert doc["violations"]["Leak"] == 1
    assert doc["violations"]["DoubleAllocation"] == 0
    assert doc["components"][0] == {
        "name": "gpu-handler[node-a]",
        "restarts_ours": 2,
        "restarts_own": 1,
        "rss_start": 80 * 2**20,
        "rss_end": 82 * 2**20,
    }
    assert doc["findings"][0]["logs"] == {"gpu-handler[node-a]": "line one\nline two"}
    assert doc["findings"][0]["events"] == "12:00:01 Normal Scheduled pod/x"


def test_an_unknown_violation_kind_is_counted_too() -> None:
    odd = Finding(kind="checkpoint-corrupt", message="m", at=1)

    assert to_json(result(strikes=[], findings=[odd]))["violations"]["checkpoint-corrupt"] == 1


def test_a_clean_run_passes_and_a_failed_strike_fails_it() -> None:
    assert result(strikes=[strike("api-cut", 3.0)]).passed
    assert not result(strikes=[strike("api-cut", None, error="boom")]).passed


def test_the_table_shows_faults_pods_components_and_each_finding_with_its_context() -> None:
    text = render(result(strikes=[strike("reboot-node", 40.0), strike("reboot-node", 20.0)], findings=[LEAK]))

    assert "FAILED" in text
    (row,) = [line for line in text.splitlines() if line.startswith("reboot-node")]
    assert row.split() == ["reboot-node", "2", "2", "0", "0", "20.0s", "40.0s"]
    assert (
        "Pods: started 120 (4.0/min), completed 117, killed by their fault 0, lost 3 (evicted 2, failed 1)"
        in text
    )
    assert "Leak 1" in text
    (component,) = [line for line in text.splitlines() if line.startswith("gpu-handler[node-a]")]
    assert component.split() == ["gpu-handler[node-a]", "2", "1", "80", "MiB", "82", "MiB"]
    assert "[Leak] at 612s: MIG device gi1 on node-a" in text
    assert "    12:00:01 Normal Scheduled pod/x" in text
    assert "  last lines of gpu-handler[node-a]:\n    line one\n    line two" in text


def test_a_failed_strike_is_printed_with_its_error() -> None:
    text = render(result(strikes=[strike("driver-reload", None, error="primitive missing: reload_driver")]))

    assert "strike driver-reload on node-a at 10s failed: primitive missing: reload_driver" in text


def test_write_puts_the_json_where_asked(tmp_path: Path) -> None:
    target = tmp_path / "artifacts" / "soak-report.json"

    write(result(strikes=[strike("api-cut", 2.5)]), target)

    assert json.loads(target.read_text())["faults"][0]["p50"] == pytest.approx(2.5)
