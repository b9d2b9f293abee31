"""Shares of a whole card (TimeSlicing, MPS): what the first share sets up, the last one undoes,
and what start-up and the watchdog repair. The MPS daemons are real detached processes (the
simulated ``nvidia-cuda-mps-control``); the card settings live in the simulated driver state."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    A30_B,
    Node,
    node,
    prepare_failures,
    whole_offer,
)

from pkg.backends.nvidia.sharing import PID_FILE, process_alive, wait_for
from pkg.backends.preparation import REASON_SHARING, CardPreparer, MpsFolders, PreparationError
from pkg.backends.simulated.mps_daemon import MARKER, SHM_FILE
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.kinds.share import ShareKind
from pkg.gpuhandler.preparation.kinds.share.card_sharing import MpsWatchdog, share_of

EXCLUSIVE_PROCESS = 3  # NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
LONG = 3  # nvidia-smi --set-timeslice=3
TS_CONFIG = {
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}},
}


def _card(n: Node, card: str = A30) -> tuple[int, int]:
    state = n.card_state(card)
    return state.compute_mode, state.time_slice


def _env(n: Node, uid: str) -> dict[str, str]:
    spec = json.loads(n.container.cdi().path_of(uid).read_text())
    return dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])


def _daemon_pid(n: Node, card: str = A30) -> int | None:
    folders = MpsFolders(n.mps_root / card)
    if not n.container.preparer().mps_running(folders):
        return None
    return int((folders.pipe / PID_FILE).read_text())


def _kill(pid: int) -> None:
    """SIGKILLs the daemon and returns once it is gone (the signal is delivered asynchronously)."""
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not process_alive(pid, MARKER.encode()), timeout=10, what=f"process {pid} to die")


def test_time_slicing_shares_set_the_cards_slice_until_the_last_one_goes(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="TimeSlicing"))
    half = {"sharePercent": "50"}
    first = n.claims.allocate("first", [offer], config=TS_CONFIG, consumed=half)
    second = n.claims.allocate("second", [offer], config=TS_CONFIG, consumed=half)

    outcomes = n.driver.prepare([first, second])

    assert [outcomes[c.uid].error for c in (first, second)] == ["", ""]
    assert _card(n) == (0, LONG)
    uuids = {_env(n, c.uid)["NVIDIA_VISIBLE_DEVICES"] for c in (first, second)}
    assert len(uuids) == 1  # both see the same card
    record = n.container.store().load().claims[first.uid].devices[0]
    assert (share := share_of(record)) is not None
    assert (share.strategy, share.share_percent, share.interval) == (
        "TimeSlicing",
        50,
        "Long",
    )

    assert n.driver.unprepare([first]) == {first.uid: ""}
    assert _card(n) == (0, LONG)  # the second share still runs on it
    assert n.driver.unprepare([second]) == {second.uid: ""}
    assert _card(n) == (0, 0)


def test_a_time_slicing_share_asking_for_another_slice_is_refused(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="TimeSlicing"))
    first = n.claims.allocate("first", [offer], config=TS_CONFIG, consumed={"sharePercent": "50"})
    n.driver.prepare([first])
    before = prepare_failures("IntervalConflict")

    other = n.claims.allocate("other", [offer], consumed={"sharePercent": "50"})  # Default slice
    error = n.driver.prepare([other])[other.uid].error

    assert "claim team/other" in error
    assert "asks for time slice Default, but the card is time-sliced Long" in error
    assert "team/first" in error
    assert prepare_failures("IntervalConflict") == before + 1
    assert _card(n) == (0, LONG)
    assert other.uid not in n.container.store().load().claims


@pytest.mark.parametrize(
    ("held", "asked", "expected"),
    [
        ("MPS", "TimeSlicing", "is a TimeSlicing share, but the card is shared by MPS"),
        ("Exclusive", "MPS", "is already prepared"),
        ("MPS", "Exclusive", "is already prepared"),
    ],
)
def test_a_card_is_shared_one_way_at_a_time(
    tmp_path: Path, held: str, asked: str, expected: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    first_offer, second_offer = n.offers.publish(
        whole_offer(A30, sharing=held), whole_offer(A30, sharing=asked)
    )
    share = {"sharePercent": "50"}
    first = n.claims.allocate("first", [first_offer], consumed=share if held != "Exclusive" else None)
    assert n.driver.prepare([first])[first.uid].error == ""

    second = n.claims.allocate("second", [second_offer], consumed=share if asked != "Exclusive" else None)
    error = n.driver.prepare([second])[second.uid].error

    assert expected in error
    assert set(n.container.store().load().claims) == {first.uid}


def test_mps_shares_run_one_daemon_per_card_with_each_shares_limits(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS", memory="24Gi"))
    small = n.claims.allocate("small", [offer], consumed={"sharePercent": "30", "memory": "4Gi"})
    large = n.claims.allocate("large", [offer], consumed={"sharePercent": "70"})

    outcomes = n.driver.prepare([small, large])

    assert [outcomes[c.uid].error for c in (small, large)] == ["", ""]
    pid = _daemon_pid(n)
    assert pid is not None
    folders = MpsFolders(n.mps_root / A30)
    assert (folders.shm / SHM_FILE).exists()  # the daemon's /dev/shm is the card's shm folder
    assert _card(n)[0] == EXCLUSIVE_PROCESS
    assert _env(n, small.uid)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert _env(n, small.uid)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"
    assert _env(n, large.uid)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "70"
    assert _env(n, large.uid)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"0={24 * 1024 * 70 // 100}M"
    assert _env(n, large.uid)["CUDA_MPS_PIPE_DIRECTORY"] == "/tmp/nvidia-mps"
    spec = json.loads(n.container.cdi().path_of(small.uid).read_text())
    mounts = {m["containerPath"]: m["hostPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    assert mounts == {"/tmp/nvidia-mps": str(folders.pipe), "/dev/shm": str(folders.shm)}

    n.driver.unprepare([small])
    assert _daemon_pid(n) == pid  # the large share still needs it
    n.driver.unprepare([large])
    assert _daemon_pid(n) is None
    assert not folders.root.exists()
    assert _card(n)[0] == 0


def test_a_failure_after_the_daemon_started_stops_it_again(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS"))
    claim = n.claims.allocate("train", [offer], consumed={"sharePercent": "50"})
    (tmp_path / "cdi").write_text("not a folder")  # the CDI spec cannot be written

    assert n.driver.prepare([claim])[claim.uid].error != ""

    assert _daemon_pid(n) is None
    assert not (n.mps_root / A30).exists()
    assert _card(n)[0] == 0
    assert n.container.store().load().claims == {}


def test_a_daemon_that_cannot_start_fails_the_share_and_restores_the_card(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS"))
    claim = n.claims.allocate("train", [offer], consumed={"sharePercent": "50"})
    n.mps_root.mkdir(parents=True)
    (n.mps_root / A30).write_text("a file where the card's folder goes")
    before = prepare_failures("SharingSetupFailed")

    error = n.driver.prepare([claim])[claim.uid].error

    assert "claim team/train" in error
    assert prepare_failures("SharingSetupFailed") == before + 1
    assert _card(n)[0] == 0
    # The folder would not go: the record stays, so start-up finishes the release.
    [kept] = n.container.store().load().claims.values()
    assert kept.state is PreparePhase.PREPARE_STARTED
    (n.mps_root / A30).unlink()
    assert n.reconcile().rolled_back == [claim.uid]
    assert n.container.store().load().claims == {}


def test_shares_make_the_checkpoint_unreadable_to_releases_that_do_not_know_them(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    whole, shared = n.offers.publish(whole_offer(A30_B), whole_offer(A30, sharing="TimeSlicing"))
    n.driver.prepare([n.claims.allocate("whole", [whole])])
    path = n.container.store().file.path
    assert json.loads(path.read_text())["minReaderVersion"] == 1  # an older release may still read it

    claim = n.claims.allocate("share", [shared], consumed={"sharePercent": "10"})
    n.driver.prepare([claim])

    assert json.loads(path.read_text())["minReaderVersion"] == ShareKind.reader_version


# -- start-up and the watchdog ------------------------------------------------------------------------


def test_start_up_restarts_the_daemon_of_recorded_shares_and_stops_orphans(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    shared, orphaned = n.offers.publish(whole_offer(A30, sharing="MPS"), whole_offer(A30_B, sharing="MPS"))
    keep = n.claims.allocate("keep", [shared], consumed={"sharePercent": "50"})
    lost = n.claims.allocate("lost", [orphaned], consumed={"sharePercent": "50"})
    n.driver.prepare([keep, lost])
    dead = _daemon_pid(n, A30)
    assert dead is not None
    _kill(dead)  # the daemon died with the node's processes
    orphan_pid = _daemon_pid(n, A30_B)
    store = n.container.store()
    data = store.load()
    del data.claims[lost.uid]  # as if the plugin died after Unprepare forgot the claim
    store.save(data)

    report = n.reconcile()

    assert report.node["MPS daemons started"] == [A30]
    assert report.node["orphan MPS daemons stopped"] == [A30_B]
    assert report.failures == []
    assert _daemon_pid(n, A30) not in (None, dead)
    assert orphan_pid is not None
    assert _daemon_pid(n, A30_B) is None
    assert not (n.mps_root / A30_B).exists()
    assert _card(n, A30_B)[0] == 0


def test_start_up_rolls_back_a_share_that_died_half_way(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS"))
    claim = n.claims.allocate("train", [offer], consumed={"sharePercent": "50"})
    n.driver.prepare([claim])
    store = n.container.store()
    data = store.load()
    data.claims[claim.uid].state = PreparePhase.PREPARE_STARTED
    store.save(data)

    report = n.reconcile()

    assert report.rolled_back == [claim.uid]
    assert _daemon_pid(n) is None
    assert not (n.mps_root / A30).exists()
    assert _card(n)[0] == 0


def test_the_watchdog_restarts_a_dead_daemon(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS"))
    n.driver.prepare([n.claims.allocate("train", [offer], consumed={"sharePercent": "50"})])
    watchdog = n.container.watchdog()
    checkpoint = n.container.store().load()
    assert watchdog.check(checkpoint) == []
    dead = _daemon_pid(n)
    assert dead is not None
    _kill(dead)
    restarts = metrics.mps_daemon_restarts._value.get()

    assert watchdog.check(checkpoint) == [A30]

    assert _daemon_pid(n) not in (None, dead)
    assert metrics.mps_daemon_restarts._value.get() == restarts + 1


def test_the_watchdog_backs_off_a_daemon_that_keeps_failing(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="MPS"))
    n.driver.prepare([n.claims.allocate("train", [offer], consumed={"sharePercent": "50"})])
    checkpoint = n.container.store().load()
    preparer = mocker.MagicMock(spec=CardPreparer)
    preparer.mps_running.return_value = False
    preparer.start_mps.side_effect = PreparationError(
        address=A30, reason=REASON_SHARING, message="exits at once"
    )
    now = [100.0]
    watchdog = MpsWatchdog(
        n.container.sharing(), preparer, initial_backoff=5.0, max_backoff=12.0, clock=lambda: now[0]
    )

    attempts = []
    for second in range(0, 40):
        now[0] = 100.0 + second
        calls = preparer.start_mps.call_count
        watchdog.check(checkpoint)
        if preparer.start_mps.call_count > calls:
            attempts.append(second)

    assert attempts == [0, 5, 15, 27, 39]  # waits 5, 10, then the 12 s ceiling
    preparer.start_mps.side_effect = None
    now[0] = 200.0
    assert watchdog.check(checkpoint) == [A30]
    preparer.mps_running.return_value = True
    assert watchdog.check(checkpoint) == []


def test_start_up_gives_the_default_slice_back_when_a_crash_left_no_share(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="TimeSlicing"))
    claim = n.claims.allocate("train", [offer], config=TS_CONFIG, consumed={"sharePercent": "50"})
    n.driver.prepare([claim])
    store = n.container.store()
    data = store.load()
    data.claims[claim.uid].state = PreparePhase.PREPARE_STARTED  # killed between configure and record
    store.save(data)
    assert _card(n) == (0, LONG)

    report = n.reconcile()

    assert report.rolled_back == [claim.uid]
    assert _card(n) == (0, 0)
    assert store.load().claims == {}
