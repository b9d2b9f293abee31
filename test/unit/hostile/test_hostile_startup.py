"""Start-up reconciliation over hostile node state: it never raises, keeps what records own, and
reports (and counts) what it left for a later round.

Each case builds the simulated node the preparation tests use, makes one thing hostile — a
checkpointed card the backend cannot see, a full disk, a folder where a spec file goes, a file
where the VM folder goes, a file in the MPS root, a sharing value this release does not know —
and runs start-up as gpu-handler does.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    A30_B,
    Node,
    mig_offer,
    node,
    whole_offer,
)

from pkg.backends.simulated.sharing import stop_simulated_daemons
from pkg.gpuhandler.preparation import metrics
from pkg.gpuhandler.preparation.checkpoint import CheckpointUnreadable, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import ORPHANS
from pkg.gpuhandler.preparation.kinds.share.card_sharing import share_of

GONE = "0000:99:00.0"  # a card the backend does not see (fallen off the bus, or on vfio-pci)


@pytest.fixture(autouse=True)
def _no_daemon_left_behind(tmp_path: Path) -> object:
    yield
    stop_simulated_daemons(tmp_path)


def _failures(step: str) -> float:
    return float(metrics.startup_failures.labels(step=step)._value.get())


def _instances(n: Node, card: str = A30) -> list[int]:
    return [gi.start for gi in n.card_state(card).gpu_instances]


def _prepared_mig(n: Node, name: str, start: int) -> str:
    [offer] = n.offers.publish(mig_offer(A30, start=start))
    claim = n.claims.allocate(name, [offer])
    assert n.driver.prepare([claim])[claim.uid].error == ""
    return claim.uid


def _move_to_gone_card(n: Node, uid: str, state: PreparePhase) -> None:
    store = n.container.store()
    data = store.load()
    record = data.claims[uid]
    record.state = state
    for device in record.devices:
        device.card = GONE
    store.save(data)


def test_a_record_of_a_card_the_backend_cannot_see_is_kept_and_reported(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    uid = _prepared_mig(n, "lost", 0)
    _move_to_gone_card(n, uid, PreparePhase.PREPARE_STARTED)
    before = _failures("roll-back")

    report = n.reconcile()

    assert [(f.step, f.card, f.claim_uid) for f in report.failures] == [("roll-back", GONE, uid)]
    assert not report.complete
    assert _failures("roll-back") == before + 1
    assert uid in n.container.store().load().claims  # kept: it alone says what to give back


def test_a_completed_claim_on_an_unreadable_card_keeps_everything_it_owns(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    owner = _prepared_mig(n, "owner", 2)
    lost = _prepared_mig(n, "lost", 0)
    _move_to_gone_card(n, lost, PreparePhase.PREPARE_STARTED)

    report = n.reconcile(cards=(A30, A30_B, GONE))

    assert owner in n.container.store().load().claims
    assert 2 in _instances(n)  # the completed claim's MIG device is never swept
    assert n.container.cdi().path_of(owner).exists()
    assert report.node[ORPHANS] == ["0000:3b:00.0@0"]  # the lost record's device moved off A30


def test_a_full_disk_fails_the_save_not_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    uid = _prepared_mig(n, "train", 1)
    store = n.container.store()
    data = store.load()
    data.claims[uid].state = PreparePhase.PREPARE_STARTED
    store.save(data)

    def full(_data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "save", full)
    report = n.reconcile()

    assert report.rolled_back == [uid]
    assert [f.step for f in report.failures] == ["save-checkpoint"]
    assert _instances(n) == []
    monkeypatch.undo()
    assert n.reconcile().complete  # the next round saves what the first one could not


def test_a_folder_where_a_cdi_spec_goes_is_reported(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    keep = _prepared_mig(n, "keep", 0)
    foreign = n.container.cdi().path_of("0b0e2ba6-1c2b-4a43-9d1d-2f5e1f4a3c55")
    foreign.mkdir(parents=True)
    (foreign / "inside").write_text("someone else's")

    report = n.reconcile()

    assert [f.step for f in report.failures] == ["orphan-cdi-specs"]
    assert keep in n.container.store().load().claims
    assert n.container.cdi().path_of(keep).exists()


def test_a_file_where_the_vm_folder_goes_is_left_alone(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    keep = _prepared_mig(n, "keep", 0)
    vm_dir = n.container.settings().vm_dir
    vm_dir.parent.mkdir(parents=True, exist_ok=True)
    vm_dir.write_text("not a folder")

    report = n.reconcile()

    assert keep in n.container.store().load().claims
    assert vm_dir.read_text() == "not a folder"
    assert report.complete


def test_a_file_named_like_a_claim_in_the_vm_folder_is_reported(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    keep = _prepared_mig(n, "keep", 0)
    vm_dir = n.container.settings().vm_dir
    vm_dir.mkdir(parents=True, exist_ok=True)
    (vm_dir / "0b0e2ba6-1c2b-4a43-9d1d-2f5e1f4a3c55").write_text("a file, not a claim's folder")

    report = n.reconcile()

    assert keep in n.container.store().load().claims
    assert [f.step for f in report.failures] == ["orphan-vm-files"]


def test_a_file_in_the_mps_root_is_reported_not_raised(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    n.mps_root.mkdir(parents=True)
    (n.mps_root / "stray").write_text("not a card's folder")
    (n.mps_root / A30_B).write_text("a file where a card's folder goes")

    report = n.reconcile()

    assert report.complete
    assert (n.mps_root / "stray").read_text() == "not a card's folder"


def test_a_sharing_value_this_release_does_not_know_leaves_everything_as_it_is(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    """The checkpoint reader refuses a value no release it can read writes (a newer one raises
    minReaderVersion): start-up then changes nothing, and says which file and claim."""
    n = node(mocker, tmp_path)
    [offer] = n.offers.publish(whole_offer(A30, sharing="TimeSlicing"))
    claim = n.claims.allocate("share", [offer], consumed={"sharePercent": "10"})
    assert n.driver.prepare([claim])[claim.uid].error == ""
    store = n.container.store()
    data = store.load()
    sharing = share_of(data.claims[claim.uid].devices[0])
    assert sharing is not None
    sharing.interval = "Eternal"
    store.save(data)
    written = store.file.path.read_bytes()
    specs = n.container.cdi().claims()

    with pytest.raises(CheckpointUnreadable, match=f"{claim.uid}.*Eternal") as refused:
        n.reconcile()

    assert str(store.file.path) in str(refused.value)
    assert store.file.path.read_bytes() == written  # the record stays for a release that knows it
    assert n.container.cdi().claims() == specs  # its CDI spec too: nothing is swept unknowing


def test_an_earlier_boots_entry_that_would_not_go_never_costs_a_claim_of_this_boot(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    old = _prepared_mig(n, "old", 0)
    _move_to_gone_card(n, old, PreparePhase.PREPARE_COMPLETED)
    rebooted = node(
        mocker,
        tmp_path / "rebooted",
        existing_host=n.host,
        claims=n.claims,
        offers=n.offers,
        kubelet_root=n.container.settings().kubelet_root,
        boot_id="boot-2",
    )

    first = rebooted.reconcile()

    assert [f.step for f in first.failures] == ["stale-boot"]
    assert rebooted.container.store().load().claims[old].state is PreparePhase.PREPARE_STARTED
    new = _prepared_mig(rebooted, "new", 3)
    second = rebooted.reconcile()  # the retry round
    assert new in rebooted.container.store().load().claims
    assert second.stale_boot == []


def test_a_file_where_the_mps_root_goes_is_no_failure(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    n.mps_root.parent.mkdir(parents=True, exist_ok=True)
    n.mps_root.write_text("not a folder")

    report = n.reconcile()

    assert report.complete
    assert n.mps_root.read_text() == "not a folder"


def test_an_api_server_failing_in_any_way_keeps_a_completed_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    uid = _prepared_mig(n, "keep", 3)

    def broken(namespace: str, name: str) -> object:
        raise ConnectionResetError("the API server went away")

    monkeypatch.setattr(n.claims, "get", broken)
    report = n.reconcile()

    assert report.unprepared == []
    assert uid in n.container.store().load().claims
    assert _instances(n) == [3]
    assert n.container.cdi().path_of(uid).exists()
