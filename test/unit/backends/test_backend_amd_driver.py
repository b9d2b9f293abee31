"""The AMD backend over a copy of a fixture node: reading, the simulated partition switch, what a
container gets, and health from the RAS counters."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from testutil.fixtures.sysfs import build, build_amd

from pkg.backends.amd.backend import AmdBackend
from pkg.backends.amd.driver import processes_of
from pkg.backends.amd.health import RasHealthEvents, check_health, events_between
from pkg.backends.amd.simulated import PROCESSES_DIR, SimulatedAmdgpu
from pkg.backends.amd.sysfs import RasCounts, card_folder, read_card
from pkg.backends.backend import VerdictStatus
from pkg.backends.health_events import Severity
from pkg.backends.preparation import PreparationError
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.health.taints import device_taints

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
CARD = "0000:05:00.0"
OTHER = "0000:26:00.0"


@pytest.fixture
def node(tmp_path: Path) -> Path:
    root = tmp_path / "sys"
    shutil.copytree(FIXTURES / "mi300x-x8", root, symlinks=True)
    return root


@pytest.fixture
def backend(node: Path, tmp_path: Path) -> AmdBackend:
    driver = SimulatedAmdgpu(sysfs_root=node, dev_root=tmp_path / "dev", state_dir=tmp_path / "state")
    (tmp_path / "dev" / "dri").mkdir(parents=True)
    (tmp_path / "dev" / "kfd").touch()
    for minor in range(128, 136):
        (tmp_path / "dev" / "dri" / f"renderD{minor}").touch()
    return AmdBackend(sysfs_root=node, dev_root=tmp_path / "dev", driver=driver)


def test_a_fresh_card_is_one_partition_on_its_own_render_node(node: Path) -> None:
    card = read_card(node, OTHER)
    assert (card.compute_mode, card.memory_mode) == ("spx", "nps1")
    assert card.compute_modes == ("spx", "dpx", "qpx", "cpx")
    assert card.render_minors == (129,)
    assert card.vram_bytes == 192 * 2**30


def test_switching_to_cpx_makes_eight_render_nodes_and_back_frees_them(
    backend: AmdBackend, node: Path
) -> None:
    preparer = backend.preparer
    preparer.set_partition_mode(CARD, "cpx")

    card = read_card(node, CARD)
    assert (card_folder(node, CARD) / "current_compute_partition").read_text() == "CPX\n"
    assert len(card.render_minors) == 8
    assert card.render_minors[0] == 128  # partition 0 keeps the card's node
    assert len(set(card.render_minors)) == 8
    assert read_card(node, OTHER).render_minors == (129,)  # the neighbour is untouched
    assert preparer.mig_enabled(CARD)

    edits = preparer.partition_edits(CARD, "cpx", 3)
    assert [n.path for n in edits.device_nodes] == [f"/dev/dri/renderD{card.render_minors[3]}"]
    assert Path(edits.device_nodes[0].host_path).exists()  # the simulated driver made the node

    preparer.set_mig_mode(CARD, enabled=False)  # what a whole-card claim does to a partitioned card
    assert read_card(node, CARD).render_minors == (128,)
    assert not preparer.mig_enabled(CARD)


def test_a_busy_card_is_not_switched(backend: AmdBackend, node: Path, tmp_path: Path) -> None:
    busy = tmp_path / "state" / PROCESSES_DIR / CARD
    busy.parent.mkdir(parents=True)
    busy.write_text("4242\n")
    assert list(backend.preparer.processes(CARD)) == [4242]

    with pytest.raises(PreparationError) as err:
        backend.preparer.set_partition_mode(CARD, "qpx")

    assert err.value.reason == "CardBusy"
    assert read_card(node, CARD).compute_mode == "spx"


def test_a_mode_the_card_lacks_is_not_supported(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    shutil.copytree(FIXTURES / "mi210", root, symlinks=True)
    driver = SimulatedAmdgpu(sysfs_root=root)
    with pytest.raises(PreparationError) as err:
        driver.switch_compute_partition("0000:63:00.0", "cpx")
    assert err.value.reason == "NotSupported"


def test_a_partition_of_another_mode_has_no_edits(backend: AmdBackend) -> None:
    with pytest.raises(PreparationError) as err:
        backend.preparer.partition_edits(CARD, "cpx", 0)
    assert err.value.reason == "DeviceNodeMissing"


def test_the_whole_card_gets_its_render_node_and_every_container_kfd(backend: AmdBackend) -> None:
    edits = backend.preparer.card_edits(CARD)
    assert [n.path for n in edits.device_nodes] == ["/dev/dri/renderD128"]
    assert [n.path for n in backend.driver_files().edits.device_nodes] == ["/dev/kfd"]


def test_uncorrectable_errors_make_the_card_unhealthy(node: Path) -> None:
    assert check_health(node, CARD).status is VerdictStatus.TRUE
    (card_folder(node, CARD) / "ras" / "umc_err_count").write_text("ue: 2\nce: 0\n")
    verdict = check_health(node, CARD)
    assert (verdict.status, verdict.reason) == (VerdictStatus.FALSE, "UncorrectableError")


def test_rising_counters_become_events_of_the_shared_severities() -> None:
    before = [RasCounts("umc", 0, 0), RasCounts("gfx", 0, 0)]
    after = [RasCounts("umc", 1, 3), RasCounts("gfx", 0, 12)]
    events = events_between(CARD, before, after)
    assert [(e.reason, e.severity) for e in events] == [
        ("UncorrectableError", Severity.FATAL),
        ("CorrectedError", Severity.RECOVERABLE),
        ("CorrectedErrorBurst", Severity.DEGRADED),
    ]


def test_the_event_source_reports_what_rose_since_the_last_poll(node: Path) -> None:
    source = RasHealthEvents(node, [CARD], poll_seconds=0)
    assert source.wait(0) == []
    (card_folder(node, CARD) / "ras" / "umc_err_count").write_text("ue: 1\nce: 0\n")
    assert [e.severity for e in source.wait(0)] == [Severity.FATAL]
    assert source.wait(0) == []


def test_processes_are_found_by_the_drm_pdev_of_their_open_files(tmp_path: Path) -> None:
    for pid, address in ((10, CARD), (11, OTHER), (12, CARD)):
        (tmp_path / str(pid) / "fdinfo").mkdir(parents=True)
        (tmp_path / str(pid) / "fdinfo" / "5").write_text(
            f"pos:\t0\ndrm-driver:\tamdgpu\ndrm-pdev:\t{address}\n"
        )
    assert processes_of(tmp_path, CARD) == [10, 12]


def test_committed_trees_match_the_builder(tmp_path: Path) -> None:
    build_amd.build_amd(tmp_path)
    for scenario, _, _ in build_amd.SCENARIOS:
        assert build.snapshot(FIXTURES / scenario.name) == build.snapshot(tmp_path / scenario.name), (
            f"test/fixtures/sysfs/{scenario.name} differs; "
            "run PYTHONPATH=test python -m testutil.fixtures.sysfs.build_amd"
        )


def test_ras_events_end_in_the_taints_nvidia_events_do(node: Path) -> None:
    """The shared tracker turns the AMD backend's events into the same taints: uncorrectable is
    NoExecute, a corrected burst NoSchedule, a recovered card none."""
    tracker = HealthTracker(quiet_period=0)
    source = RasHealthEvents(node, [CARD, OTHER], poll_seconds=0)
    source.wait(0)
    (card_folder(node, CARD) / "ras" / "umc_err_count").write_text("ue: 1\nce: 0\n")
    (card_folder(node, OTHER) / "ras" / "gfx_err_count").write_text("ue: 0\nce: 25\n")
    for event in source.wait(0):
        tracker.record(event)

    assert [(t.value, t.effect) for t in device_taints(tracker.verdict(CARD))] == [
        ("UncorrectableError", "NoExecute")
    ]
    assert [(t.value, t.effect) for t in device_taints(tracker.verdict(OTHER))] == [
        ("CorrectedErrorBurst", "NoSchedule")
    ]
    tracker.probe(OTHER, check_health(node, OTHER))  # corrected errors leave the probe healthy
    assert device_taints(tracker.verdict(OTHER)) == []
    tracker.probe(CARD, check_health(node, CARD))  # the uncorrectable error is still counted
    assert device_taints(tracker.verdict(CARD)) != []
