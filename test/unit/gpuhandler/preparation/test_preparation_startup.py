"""Start-up reconciliation and the crash points that prove it: what a restarted gpu-handler repairs."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest
from preparation_fakes import A30, A30_B, Node, mig_offer, node

from pkg.framework.steptaker import Continue, StepTaker
from pkg.gpuhandler.preparation.checkpoint import PrepareState
from pkg.gpuhandler.preparation.crash import CRASH_AT_ENV, CrashPoint, with_crash_points


def _instances(n: Node, card: str = A30) -> list[int]:
    return [gi.start for gi in n.backend._nvml.state.card(card).gpu_instances]  # type: ignore[attr-defined]


def test_a_prepare_that_died_half_way_is_rolled_back(tmp_path: Path) -> None:
    n = node(tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=2))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    store = n.container.store()
    data = store.load()
    data.claims[claim.uid].state = PrepareState.PREPARE_STARTED  # as if it died before recording completion
    store.save(data)

    report = n.reconcile()

    assert report.rolled_back == [claim.uid]
    assert _instances(n) == []
    assert not n.container.cdi().path_of(claim.uid).exists()
    assert store.load().claims == {}


def test_a_claim_deleted_while_the_plugin_was_down_is_unprepared(tmp_path: Path) -> None:
    n = node(tmp_path)
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


def test_what_no_claim_owns_is_removed_and_what_one_owns_is_kept(tmp_path: Path) -> None:
    n = node(tmp_path)
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    n.container.preparer().create_mig_device(A30, profile_id=14, start=0, size=1)  # made by nobody we know
    stray = "11111111-2222-4333-8444-555555555555"
    n.container.cdi().write(stray, {"gpu-x": n.container.preparer().card_edits(A30_B)})

    report = n.reconcile()

    assert report.orphan_mig_devices == [f"{A30}@0"]
    assert report.orphan_cdi_specs == [stray]
    assert _instances(n) == [3]
    assert set(n.container.cdi().claims()) == {claim.uid}


def test_entries_of_an_earlier_boot_are_dropped(tmp_path: Path) -> None:
    n = node(tmp_path, boot_id="boot-1")
    [offer] = n.offers.publish(mig_offer(A30, start=1))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    rebooted = node(tmp_path, claims=n.claims, offers=n.offers, existing_host=n.host, boot_id="boot-2")

    report = rebooted.reconcile()

    assert report.stale_boot == [claim.uid]
    assert rebooted.container.store().load().boot_id == "boot-2"
    assert rebooted.container.store().load().claims == {}
    assert not rebooted.container.cdi().path_of(claim.uid).exists()


def test_an_unreadable_checkpoint_stops_reconciliation_before_it_removes_anything(tmp_path: Path) -> None:
    n = node(tmp_path)
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


class _Step:
    name = "work"

    def take(self, ctx: list[str]) -> Continue:
        ctx.append("worked")
        return Continue()


def test_crash_points_wrap_only_the_named_step_of_the_named_pipeline() -> None:
    steps = [_Step()]
    assert with_crash_points("prepare", steps, {}) == steps
    assert with_crash_points("prepare", steps, {CRASH_AT_ENV: "unprepare:work:after"}) == steps
    assert with_crash_points("prepare", steps, {CRASH_AT_ENV: "prepare:work:sideways"}) == steps
    [wrapped] = with_crash_points("prepare", steps, {CRASH_AT_ENV: "prepare:work:after"})
    assert isinstance(wrapped, CrashPoint)
    assert wrapped.name == "work"


def _run_crashing(when: str, marker: str) -> None:
    done: list[str] = []
    StepTaker(name="prepare", steps=[CrashPoint(_Step(), pipeline="prepare", when=when)]).run(done)
    Path(marker).write_text(",".join(done))  # reached only if the process did not die


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_point_kills_the_process_with_sigkill(tmp_path: Path, when: str) -> None:
    marker = tmp_path / "survived"
    child = multiprocessing.get_context("fork").Process(target=_run_crashing, args=(when, str(marker)))
    child.start()
    child.join(20)

    assert child.exitcode == -signal.SIGKILL
    assert not marker.exists()
    assert os.getpid() > 0  # the test process itself lives on
