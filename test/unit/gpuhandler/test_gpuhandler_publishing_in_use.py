"""The devices in use follow the checkpoint feed, wake the publisher only on a change, and reach
the publisher on the next pass."""

from __future__ import annotations

from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PrepareState
from pkg.gpuhandler.preparation.vfio_holds import VfioHolds
from pkg.gpuhandler.publishing.in_use import DevicesInUse

POOL = "gpus/node-a"


def checkpoint(*devices: tuple[str, str]) -> CheckpointData:
    records = [
        DeviceRecord.model_validate(
            {"pool": pool, "device": name, "card": "0000:18:00.0", "deviceType": "MIG"}
        )
        for pool, name in devices
    ]
    claim = ClaimRecord(
        uid="u1", namespace="ns", name="c", state=PrepareState.PREPARE_COMPLETED, devices=records
    )
    return CheckpointData.model_validate({"bootID": "b", "claims": {"u1": claim}})


def test_nothing_told_means_no_set_and_the_static_order() -> None:
    assert DevicesInUse().names() is None


def test_the_set_follows_the_checkpoint_feed_of_our_pool_only() -> None:
    holds, in_use = VfioHolds(), DevicesInUse()
    holds.subscribe(lambda cp: in_use.update(cp.devices_in_use(POOL)))
    holds.update(checkpoint((POOL, "gpu-0000-18-00-0-mig-1g-3"), ("gpus/other", "x")))
    assert in_use.names() == frozenset({"gpu-0000-18-00-0-mig-1g-3"})
    holds.update(CheckpointData.model_validate({"bootID": "b"}))
    assert in_use.names() == frozenset()


def test_a_burst_of_unchanged_sets_wakes_the_publisher_once() -> None:
    in_use = DevicesInUse()
    woken: list[None] = []
    in_use.subscribe(lambda: woken.append(None))
    for _ in range(100):
        in_use.update(["a", "b"])
    assert len(woken) == 1
    in_use.update(["a"])
    assert len(woken) == 2
