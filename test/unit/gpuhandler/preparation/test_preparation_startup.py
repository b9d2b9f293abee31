"""Start-up reconciliation and the crash points that prove it: what a restarted gpu-handler repairs."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, A30_B, Node, mig_offer, node

from pkg.framework.steptaker import Pipeline, StepOutcome, When
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.crash import CRASH_AT_ENV, crash_at, crash_hook
from pkg.gpuhandler.preparation.kinds.mig import ORPHANS
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS


def _instances(n: Node, card: str = A30) -> list[int]:
    return [gi.start for gi in n.card_state(card).gpu_instances]


def test_a_prepare_that_died_half_way_is_rolled_back(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=2))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    store = n.container.store()
    data = store.load()
    data.claims[claim.uid].state = PreparePhase.PREPARE_STARTED  # as if it died before recording completion
    store.save(data)

    report = n.reconcile()

    assert report.rolled_back == [claim.uid]
    assert _instances(n) == []
    assert not n.container.cdi().path_of(claim.uid).exists()
    assert store.load().claims == {}


def test_a_claim_deleted_while_the_plugin_was_down_is_unprepared(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    kept, gone = n.offers.publish(mig_offer(A30, start=0), mig_offer(A30, start=1))
    keep = n.claims.allocate("keep", [kept])
    lost = n.claims.allocate("lost", [gone])
    n.driver.prepare([keep, lost])
    n.claims.delete(lost)

    report = n.reconcile()

    assert report.unprepared == [lost.uid]
    assert _instances(n) == [0]
    assert set(n.container.store().load().claims) == {keep.uid}
    assert n.container.cdi().path_of(keep.uid).exists()


def test_what_no_claim_owns_is_removed_and_what_one_owns_is_kept(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    n.container.preparer().create_mig_device(A30, profile_id=14, start=0, size=1)  # made by nobody we know
    stray = "11111111-2222-4333-8444-555555555555"
    n.container.cdi().write(stray, {"gpu-x": n.container.preparer().card_edits(A30_B)})

    report = n.reconcile()

    assert report.node[ORPHANS] == [f"{A30}@0"]
    assert report.orphan_cdi_specs == [stray]
    assert _instances(n) == [3]
    assert set(n.container.cdi().claims()) == {claim.uid}


def test_entries_of_an_earlier_boot_are_dropped(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path, boot_id="boot-1")
    [offer] = n.offers.publish(mig_offer(A30, start=1))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    rebooted = node(
        mocker, tmp_path, claims=n.claims, offers=n.offers, existing_host=n.host, boot_id="boot-2"
    )

    report = rebooted.reconcile()

    assert report.stale_boot == [claim.uid]
    assert rebooted.container.store().load().boot_id == "boot-2"
    assert rebooted.container.store().load().claims == {}
    assert not rebooted.container.cdi().path_of(claim.uid).exists()


def test_an_unreadable_checkpoint_stops_reconciliation_before_it_removes_anything(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=1))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    path = n.container.store().file.path
    path.write_text(path.read_text().replace("PrepareCompleted", "PrepareCompleteD"))

    with pytest.raises(Exception, match="checksum mismatch"):
        n.reconcile()

    assert _instances(n) == [1]
    assert n.container.cdi().path_of(claim.uid).exists()
    assert "checksum" in n.driver.prepare([claim])[claim.uid].error  # every prepare says why


# -- crash points -----------------------------------------------------------------------------------


def test_a_crash_point_is_read_only_for_a_point_of_its_own_pipeline() -> None:
    assert crash_at("prepare", PREPARE_POINTS, {}) is None
    assert crash_at("prepare", PREPARE_POINTS, {CRASH_AT_ENV: "unprepare:plan:after"}) is None
    assert crash_at("prepare", PREPARE_POINTS, {CRASH_AT_ENV: "prepare:plan:sideways"}) is None
    assert crash_at("prepare", PREPARE_POINTS, {CRASH_AT_ENV: "prepare:no-such-point:after"}) is None
    assert crash_at("unprepare", UNPREPARE_POINTS, {CRASH_AT_ENV: "unprepare:plan:after"}) is None
    assert crash_at("prepare", PREPARE_POINTS, {CRASH_AT_ENV: "prepare:plan:after"}) == ("plan", "after")
    assert crash_at("unprepare", UNPREPARE_POINTS, {CRASH_AT_ENV: "unprepare:forget-claim:before"}) == (
        "forget-claim",
        "before",
    )


class _Plan:
    name = "plan"

    def __init__(self) -> None:
        self.done: list[str] = []

    def take(self, context: None) -> StepOutcome:
        self.done.append("worked")
        return StepOutcome.DONE

    def undo(self, context: None) -> None:
        self.done.append("undone")


def _run_crashing(when: When, marker: str) -> None:
    step = _Plan()
    hook = crash_hook("prepare", ["plan"], {CRASH_AT_ENV: f"prepare:plan:{when}"})
    Pipeline("prepare", [step], hook=hook).run(None)
    Path(marker).write_text(",".join(step.done))  # reached only if the process did not die


def test_no_hook_without_a_crash_point_of_the_pipeline() -> None:
    assert crash_hook("prepare", PREPARE_POINTS, {}) is None
    assert crash_hook("prepare", PREPARE_POINTS, {CRASH_AT_ENV: "unprepare:plan:after"}) is None


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_point_kills_the_process_with_sigkill(tmp_path: Path, when: str) -> None:
    marker = tmp_path / "survived"
    child = multiprocessing.get_context("fork").Process(target=_run_crashing, args=(when, str(marker)))
    child.start()
    child.join(20)

    assert child.exitcode == -signal.SIGKILL
    assert not marker.exists()
    assert os.getpid() > 0  # the test process itself lives on
