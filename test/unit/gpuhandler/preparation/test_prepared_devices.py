"""``gpu_dra_prepared_device_info``: one series per prepared MIG device, from the checkpoint."""

from __future__ import annotations

from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import MigRecord
from pkg.gpuhandler.preparation.prepared_devices import PreparedDevicesCollector


def _mig(device: str, uuid: str | None, gi: int | None) -> DeviceRecord:
    mig = MigRecord(profile_id=14, placement_start=0, placement_size=1, gpu_instance=gi, uuid=uuid)
    return DeviceRecord(pool="n1", device=device, card="0000:3b:00.0", device_type="MIG", mig=mig)


def _samples(collector: PreparedDevicesCollector) -> list[dict[str, str]]:
    return [dict(s.labels) for family in collector.collect() for s in family.samples]


def test_prepared_mig_devices_are_exported_and_nothing_else() -> None:
    data = CheckpointData(
        boot_id="b",
        claims={
            "u1": ClaimRecord(
                uid="u1",
                namespace="ns",
                name="c1",
                state=PreparePhase.PREPARE_COMPLETED,
                devices=[
                    _mig("gpu-0-mig-14-0", "MIG-aaaa", 7),
                    DeviceRecord(pool="n1", device="gpu-1", card="0000:d8:00.0", device_type="Physical"),
                ],
            ),
            "u2": ClaimRecord(  # half-done: the instance may not exist
                uid="u2",
                namespace="ns",
                name="c2",
                state=PreparePhase.PREPARE_STARTED,
                devices=[_mig("gpu-0-mig-14-1", None, None)],
            ),
        },
    )
    collector = PreparedDevicesCollector(load=lambda: data, node="n1")
    assert _samples(collector) == [
        {
            "namespace": "ns",
            "claim": "c1",
            "dra_device": "gpu-0-mig-14-0",
            "node": "n1",
            "mig_uuid": "MIG-aaaa",
            "GPU_I_ID": "7",
        }
    ]


def test_an_unreadable_checkpoint_exports_an_empty_family() -> None:
    def broken() -> CheckpointData:
        raise OSError("disk gone")

    assert _samples(PreparedDevicesCollector(load=broken, node="n1")) == []
