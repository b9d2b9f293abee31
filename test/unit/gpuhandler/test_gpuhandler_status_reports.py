"""The identity each kind of device carries in its entry's data (whole card, MIG, vGPU, share), the
prepared claims restored from the checkpoint, and the status loop acting on the applier's outcomes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import DeviceStatusData, ShareLimits
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.attribution.claim_status import ClaimStatusWriter, Outcome, WriteResult
from pkg.gpuhandler.attribution.status_book import DeviceStatusBook
from pkg.gpuhandler.attribution.status_loop import DeviceStatusLoop
from pkg.gpuhandler.attribution.status_reports import BookStatusReports, CardName, device_identity
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import MigRecord
from pkg.gpuhandler.preparation.kinds.share.card_sharing import SharingRecord
from pkg.gpuhandler.preparation.kinds.vm.records import VgpuRecord
from pkg.gpuhandler.preparation.services import DeviceKey

CARD = "0000:3b:00.0"
NAME = CardName("node-a-0000-3b-00-0", "GPU-aaaa")
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def device(device_type: str = "Physical", share_id: str | None = None, **records: object) -> DeviceRecord:
    return DeviceRecord(
        pool="gpus/node-a", device="gpu-0", card=CARD, device_type=device_type, share_id=share_id, **records
    )


def test_a_whole_card_names_its_card_and_uuid() -> None:
    identity = device_identity(device(), NAME)
    assert identity.key == DeviceKey("gpus/node-a", "gpu-0", None)
    assert identity.card == CARD
    assert identity.data == DeviceStatusData(
        device_type="Physical", physical_gpu=NAME.physical_gpu, uuid="GPU-aaaa", pci_bus_id=CARD
    )


def test_a_mig_device_names_its_own_uuid() -> None:
    mig = MigRecord(profile_id=14, placement_start=0, placement_size=1, gpu_instance=1, uuid="MIG-cccc")
    data = device_identity(device("MIG", mig=mig), NAME).data
    assert (data.uuid, data.pci_bus_id, data.device_type) == ("MIG-cccc", CARD, "MIG")


def test_a_vgpu_names_its_mdev_and_no_host_uuid() -> None:
    vgpu = VgpuRecord(mdev_type="nvidia-558", mdev_uuid="9d0e5a30-0000-4000-8000-000000000001")
    data = device_identity(device("VGPU", vgpu=vgpu), NAME).data
    assert (data.mdev_uuid, data.uuid, data.physical_gpu) == (
        "9d0e5a30-0000-4000-8000-000000000001",
        None,
        NAME.physical_gpu,
    )


@pytest.mark.parametrize(("strategy", "interval"), [("MPS", None), ("TimeSlicing", "Short")])
def test_a_share_names_its_limits(strategy: str, interval: str | None) -> None:
    sharing = SharingRecord(
        strategy=strategy, share_percent=25, memory_mib=6144, interval=interval or "Default"
    )
    identity = device_identity(device(share_id="s1", sharing=sharing), NAME)
    assert identity.key.share_id == "s1"
    assert identity.data.share == ShareLimits(
        strategy=strategy, share_percent=25, memory_mib=6144, interval=interval
    )
    assert identity.data.uuid == "GPU-aaaa"


def test_a_card_the_informer_does_not_know_still_names_its_pci_address() -> None:
    data = device_identity(device(), None).data
    assert (data.pci_bus_id, data.physical_gpu, data.uuid) == (CARD, None, None)


def test_the_checkpoints_prepared_claims_are_restored_ready_since_their_record() -> None:
    book = DeviceStatusBook(verdicts=dict, now=lambda: datetime(2030, 1, 1, tzinfo=UTC))
    reports = BookStatusReports(book=book, cards=lambda: {CARD: NAME})
    done = ClaimRecord(
        uid="u1",
        namespace="team",
        name="c1",
        state=PreparePhase.PREPARE_COMPLETED,
        devices=[device()],
        updated=T0,
    )
    started = ClaimRecord(
        uid="u2", namespace="team", name="c2", state=PreparePhase.PREPARE_STARTED, devices=[device()]
    )
    reports.seed(CheckpointData(boot_id="b", claims={"u1": done, "u2": started}))
    [claim] = book.pending()
    assert claim.uid == "u1"
    [ready] = [c for c in claim.entries[0]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", "2026-11-29T10:00:00Z")


def test_the_loop_settles_written_claims_forgets_gone_ones_and_resolves_failures(
    mocker: MockerFixture,
) -> None:
    book = DeviceStatusBook(verdicts=dict, now=lambda: T0)
    reports = BookStatusReports(book=book, cards=lambda: {CARD: NAME})
    writer = mocker.Mock(spec=ClaimStatusWriter)
    loop = DeviceStatusLoop(book=book, writer=writer)

    reports.failed(ClaimRef("team", "c1", "u1"), None, reason="NodeLockTimeout", message="waited 30 s")
    writer.write.return_value = WriteResult(Outcome.RESOLVED, (DeviceKey("gpus/node-a", "gpu-0"),))
    loop.step()
    [claim] = book.pending()
    assert not claim.unresolved
    assert claim.entries[0]["conditions"][0]["reason"] == "NodeLockTimeout"

    writer.write.return_value = WriteResult(Outcome.LATER)
    loop.step()
    assert [c.uid for c in book.pending()] == ["u1"]  # backing off: still pending

    writer.write.return_value = WriteResult(Outcome.WRITTEN)
    loop.step()
    assert book.pending() == []

    reports.prepared(
        ClaimRecord(
            uid="u2", namespace="team", name="c2", state=PreparePhase.PREPARE_COMPLETED, devices=[device()]
        )
    )
    writer.write.return_value = WriteResult(Outcome.GONE)
    loop.step()
    assert book.pending() == []
    writer.forget.assert_called_once_with("u2")
    book.card_health(CARD, mocker.Mock(healthy=True))
    assert book.pending() == []  # forgotten: a verdict change writes nothing for it
