"""Real values for the step unit tests (test_prepare_steps, test_unprepare_steps): a claim, its
devices and records, a checkpoint, an attempt as ``load-checkpoint`` leaves it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.attempt import ClaimAttempt
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord, PreparePhase

UID = "0f3c2a4e-1b2c-4d5e-8f90-123456789abc"
OTHER_UID = "7d1e9b20-3c4d-4e5f-a061-fedcba987654"
POOL = "gpus/node-a"
A30 = "0000:3b:00.0"
A30_B = "0000:d8:00.0"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
CLAIM = ClaimRef(namespace="team", name="train", uid=UID)
DRIVER_ID = "k8s.gpu.deckhouse.io/driver=nvidia"


# -- real values ------------------------------------------------------------------------------------


def device(
    name: str = "gpu-3b-mig-14-3",
    card: str = A30,
    *,
    share_id: str | None = None,
    cdi_ids: Sequence[str] = (),
    requests: Sequence[str] = ("gpu",),
) -> DeviceRecord:
    return DeviceRecord(
        pool=POOL,
        device=name,
        requests=list(requests),
        card=card,
        device_type="MIG",
        share_id=share_id,
        cdi_device_ids=list(cdi_ids),
    )


def record(
    *devices: DeviceRecord,
    uid: str = UID,
    name: str = "train",
    state: PreparePhase = PreparePhase.PREPARE_STARTED,
) -> ClaimRecord:
    return ClaimRecord(uid=uid, namespace="team", name=name, state=state, devices=list(devices), updated=T0)


def checkpoint(*records: ClaimRecord) -> CheckpointData:
    return CheckpointData(boot_id="boot-1", claims={r.uid: r for r in records})


def attempt(data: CheckpointData | None = None, **fields: Any) -> ClaimAttempt:
    return ClaimAttempt(CLAIM, checkpoint=data if data is not None else checkpoint(), **fields)
