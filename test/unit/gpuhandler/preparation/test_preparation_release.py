"""Releasing a claim, in the one order a rolled-back Prepare, Unprepare and start-up share: every
device by its kind, a card's MIG mode back as this attempt found it, the CDI spec last."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, A30_B, POOL, Node, node

from pkg.backends.preparation import ContainerEdits, DeviceNode
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds import ClaimWork, Kinds
from pkg.gpuhandler.preparation.kinds.mig import MigKind
from pkg.gpuhandler.preparation.kinds.whole_card import WholeCardKind
from pkg.gpuhandler.preparation.release import ClaimRelease

UID = "8d1e4c2a-3b5f-4e6d-9a7b-1c2d3e4f5a6b"
OTHER = "0f9e8d7c-6b5a-4948-8372-615049382716"


def _record(*devices: DeviceRecord, uid: str = UID) -> ClaimRecord:
    return ClaimRecord(
        uid=uid, namespace="team", name="c", state=PreparePhase.PREPARE_STARTED, devices=list(devices)
    )


def _mig(card: str, start: int) -> DeviceRecord:
    return DeviceRecord.model_validate(
        {
            "pool": POOL,
            "device": f"mig-{card}-{start}",
            "card": card,
            "deviceType": "MIG",
            "mig": {"profileID": 14, "placementStart": start, "placementSize": 1},
        }
    )


def _whole(card: str) -> DeviceRecord:
    return DeviceRecord.model_validate(
        {"pool": POOL, "device": f"gpu-{card}", "card": card, "deviceType": "Physical"}
    )


def _prepared(n: Node, record: ClaimRecord, *others: ClaimRecord) -> tuple[CheckpointData, ClaimWork]:
    """``record``'s devices prepared by their kinds and its CDI spec written, as a Prepare that
    failed right before ``record-completed`` leaves them."""
    checkpoint = CheckpointData(boot_id="b", claims={c.uid: c for c in (record, *others)})
    work = ClaimWork(record=record, checkpoint=checkpoint)
    kinds: Kinds = n.container.kinds()
    edits = {device.device: kinds.of(device).prepare(device, work) for device in record.devices}
    n.container.cdi().write(record.uid, edits)
    return checkpoint, work


def test_a_rollback_puts_the_card_back_out_of_mig_mode_and_removes_everything(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    preparer = n.container.preparer()
    record = _record(_mig(A30, 0), _mig(A30, 1))
    checkpoint, work = _prepared(n, record)
    assert work.found_mig_modes == {A30: False}

    changed = n.container.release().release(record, checkpoint, found_mig_modes=work.found_mig_modes)

    assert changed == {A30}
    assert n.card_state(A30).gpu_instances == []
    assert not preparer.mig_enabled(A30)  # as it was found
    assert not n.container.cdi().path_of(UID).exists()


def test_unprepare_leaves_mig_mode_on_and_a_rollback_leaves_a_card_another_claim_uses(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    preparer = n.container.preparer()
    mine, theirs = _record(_mig(A30, 0)), _record(_mig(A30, 3), uid=OTHER)
    checkpoint, work = _prepared(n, mine)
    assert work.found_mig_modes == {A30: False}
    checkpoint.claims[OTHER] = theirs
    MigKind(preparer).prepare(theirs.devices[0], ClaimWork(record=theirs, checkpoint=checkpoint))
    release: ClaimRelease = n.container.release()

    release.release(mine, checkpoint, found_mig_modes=work.found_mig_modes)
    assert preparer.mig_enabled(A30)  # the other claim's MIG device is on it
    assert [d.start for d in preparer.mig_devices(A30)] == [3]

    del checkpoint.claims[UID]
    release.release(theirs, checkpoint)  # Unprepare: it knows no mode to go back to
    assert preparer.mig_enabled(A30)
    assert preparer.mig_devices(A30) == []


def test_a_whole_card_rolled_back_goes_back_into_the_empty_mig_mode_it_was_found_in(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    preparer = n.container.preparer()
    preparer.set_mig_mode(A30_B, enabled=True)
    record = _record(_whole(A30_B))
    checkpoint, work = _prepared(n, record)
    assert not preparer.mig_enabled(A30_B)

    changed = n.container.release().release(record, checkpoint, found_mig_modes=work.found_mig_modes)

    assert changed == {A30_B}
    assert preparer.mig_enabled(A30_B)


def test_a_device_that_cannot_be_released_does_not_keep_the_others(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    preparer = n.container.preparer()
    stuck = mocker.MagicMock(spec=WholeCardKind)
    stuck.record_field = None  # the whole card's kind
    stuck.release.side_effect = OSError("the card does not answer")
    cdi = n.container.cdi()
    release = ClaimRelease(kinds=Kinds([stuck, MigKind(preparer)]), preparer=preparer, cdi=cdi)
    record = _record(_mig(A30, 2), _whole(A30_B))
    checkpoint = CheckpointData(boot_id="b", claims={UID: record})
    MigKind(preparer).prepare(record.devices[0], ClaimWork(record=record, checkpoint=checkpoint))
    edits = ContainerEdits(device_nodes=(DeviceNode(path="/dev/x", host_path="/dev/x"),))
    cdi.write(UID, {"mig": edits})

    with pytest.raises(OSError, match="does not answer"):
        release.release(record, checkpoint)

    assert preparer.mig_devices(A30) == []  # released although the device after it failed first
    assert not cdi.path_of(UID).exists()
