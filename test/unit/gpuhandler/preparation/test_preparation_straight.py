"""Prepare and Unprepare as the composition root declares them: the steps in order, each one a
crash point by name, each failure after ``record-started`` rolled back through the undos, the
recorded answer.

The preparation node of :mod:`preparation_fakes` (the production pipelines over the simulated
NVML); a pipeline is run directly where a test needs the
:class:`~pkg.gpuhandler.preparation.attempt.ClaimAttempt` (where it failed), through the driver
where the kubelet's answer is the point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, Node, kill_at, mig_offer, node

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.framework.steptaker import Pipeline
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, PreparePhase
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS


def _instances(n: Node, card: str = A30) -> list[int]:
    return [gi.start for gi in n.card_state(card).gpu_instances]


def _mig_mode(n: Node) -> int:
    return int(n.backend._nvml.mig_mode(A30)[0])


def _mig_claim(n: Node, start: int = 3) -> ClaimRef:
    [offer] = n.offers.publish(mig_offer(A30, start=start))
    return n.claims.allocate("train", [offer])


def _run(pipeline: Pipeline[ClaimAttempt], claim: ClaimRef) -> ClaimAttempt:
    """``pipeline`` run over ``claim`` as the driver runs it (without the node lock)."""
    attempt = ClaimAttempt(claim)
    result = pipeline.run(attempt)
    attempt.error, attempt.failed_at = result.error, result.failed_at
    return attempt


def _prepare(n: Node, claim: ClaimRef) -> ClaimAttempt:
    return _run(n.container.prepare(), claim)


def _unprepare(n: Node, claim: ClaimRef) -> ClaimAttempt:
    return _run(n.container.unprepare(), claim)


class _Steps:
    """The steps the pipelines reach, in order, as ``<pipeline>:<step>``: from the runner's log of
    every step it takes."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def seen(self) -> list[str]:
        return [
            f"{r.__dict__['pipeline']}:{r.__dict__['step']}"
            for r in self._caplog.records
            if r.name == "pkg.framework.steptaker.pipeline" and hasattr(r, "step")
        ]

    def clear(self) -> None:
        self._caplog.clear()


@pytest.fixture
def passed(caplog: pytest.LogCaptureFixture) -> _Steps:
    caplog.set_level(logging.DEBUG, logger="pkg.framework.steptaker.pipeline")
    return _Steps(caplog)


# -- the phases, in order, named as the crash points ---------------------------------------------


def test_a_prepare_passes_every_crash_point_in_order_and_an_unprepare_too(
    tmp_path: Path, passed: _Steps, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)

    assert n.driver.prepare([claim])[claim.uid].error == ""
    assert passed.seen() == [f"prepare:{p}" for p in PREPARE_POINTS]
    passed.clear()
    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert passed.seen() == [f"unprepare:{p}" for p in UNPREPARE_POINTS]


def test_the_recorded_answer_ends_a_prepare_and_needs_no_api_call(
    tmp_path: Path, passed: _Steps, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)
    first = n.driver.prepare([claim])[claim.uid]
    n.claims.delete(claim)
    passed.clear()

    attempt = _prepare(n, claim)

    assert passed.seen() == ["prepare:load-checkpoint", "prepare:recorded-answer"]
    assert attempt.answer == first
    assert (attempt.error, attempt.note) == (None, "already prepared: the recorded answer")
    assert _instances(n) == [3]


def test_a_claim_never_prepared_ends_an_unprepare_and_loses_only_its_leftover_cdi_spec(
    tmp_path: Path, passed: _Steps, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)
    n.container.cdi().write(claim.uid, {"gpu-x": n.container.preparer().card_edits(A30)})

    attempt = _unprepare(n, claim)

    assert passed.seen() == ["unprepare:load-checkpoint", "unprepare:nothing-to-unprepare"]
    assert (attempt.error, attempt.note) == (None, "not prepared on this node")
    assert not n.container.cdi().path_of(claim.uid).exists()


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", PREPARE_POINTS)
def test_a_mig_claim_killed_at_any_prepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)
    kill_at(n, monkeypatch, f"prepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile()
    assert restarted.driver.prepare([claim])[claim.uid].error == ""  # the kubelet's retry
    assert _instances(restarted) == [3]
    [record] = restarted.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_COMPLETED


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("point", UNPREPARE_POINTS)
def test_a_mig_claim_killed_at_any_unprepare_point_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, when: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    kill_at(n, monkeypatch, f"unprepare:{point}:{when}", claim)

    restarted = n.another_instance()
    restarted.reconcile()
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}  # the kubelet's retry
    assert _instances(restarted) == []
    assert restarted.container.store().load().claims == {}
    assert not restarted.container.cdi().path_of(claim.uid).exists()


def test_a_kill_is_no_failure_nothing_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)

    kill_at(n, monkeypatch, "prepare:prepare-devices:after", claim)

    [record] = n.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_STARTED  # left for start-up or the retry
    assert _instances(n) == [3]


# -- every failure after record-started rolls back -------------------------------------------------


def _failing_cdi(n: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    def write(uid: str, edits: object) -> list[str]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(n.container.cdi(), "write", write)


def _failing_mig(n: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    n.backend._nvml.state.set_processes(A30, [31337])  # type: ignore[attr-defined]


def _failing_second_save(n: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    store = n.container.store()
    save = store.save
    saves: list[int] = []

    def failing(data: CheckpointData) -> None:
        saves.append(1)
        if len(saves) == 2:  # record-completed's
            raise OSError(5, "Input/output error")
        save(data)

    monkeypatch.setattr(store, "save", failing)


@pytest.mark.parametrize(
    ("phase", "break_it", "reason"),
    [
        ("prepare-devices", _failing_mig, "runs processes [31337]"),
        ("write-cdi-spec", _failing_cdi, "No space left on device"),
        ("record-completed", _failing_second_save, "Input/output error"),
    ],
)
def test_a_failure_after_record_started_is_rolled_back_through_the_release_order(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    phase: str,
    break_it: Callable[[Node, pytest.MonkeyPatch], None],
    reason: str,
    mocker: MockerFixture,
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)
    break_it(n, monkeypatch)

    attempt = _prepare(n, claim)

    assert attempt.failed_at == phase
    assert reason in str(attempt.error)
    assert attempt.answer is None
    assert _instances(n) == []
    assert _mig_mode(n) == 0  # switched on for this claim (if it got that far), back off
    assert n.container.store().load().claims == {}
    assert not n.container.cdi().path_of(claim.uid).exists()


def test_a_failure_before_record_started_changes_nothing_and_names_its_phase(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=1))
    first = n.claims.allocate("first", [offer])
    second = n.claims.allocate("second", [offer])  # two allocators raced
    assert n.driver.prepare([first])[first.uid].error == ""

    attempt = _prepare(n, second)

    assert attempt.failed_at == "refuse-double-allocation"
    assert attempt.plan is not None  # the failure's events name its cards
    assert [d.card for d in attempt.plan.devices] == [A30]
    assert set(n.container.store().load().claims) == {first.uid}
    assert _instances(n) == [1]


def test_an_unprepare_whose_release_fails_keeps_the_record_for_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    claim = _mig_claim(n)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    release = n.container.release()
    original = release.release

    def failing(*args: object, **kwargs: object) -> set[str]:
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(release, "release", failing)
    errors = n.driver.unprepare([claim])
    assert "Device or resource busy" in errors[claim.uid]
    assert claim.uid in n.container.store().load().claims  # only forget-claim forgets

    monkeypatch.setattr(release, "release", original)
    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert _instances(n) == []
    assert n.container.store().load().claims == {}
