"""The claim-status usage writer as a service: what it asks of the API (one status apply per claim,
under its own field manager, naming only its driver's entries and the claim's uid), when it asks
(first sight, a material change after ``min_interval``, or ``refresh``), and how a failed write
backs off per claim, and which claims it stops writing (gone from the API) until they are unprepared."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from pytest_mock import MockerFixture, MockType

from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.errors import ApiError, ConflictError, NotFoundError
from pkg.gpuhandler.attribution.claim_status import FIELD_MANAGER, ClaimUsageWriter
from pkg.gpuhandler.attribution.sampler import ATTRIBUTED, PreparedDevice, UsageKey, UsageRow, UsageSample

TAKEN_AT = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
DEVICE = PreparedDevice(
    namespace="team-a",
    claim="c1",
    claim_uid="uid-1",
    pool="node-a",
    device="gpu-0-share",
    share_id="s1",
    card="0000:3b:00.0",
    physicalgpu="node-a-0",
    uuid="GPU-aaaa",
)


def sample(memory: int = 1 << 30, sm: int = 30) -> UsageSample:
    key = UsageKey(
        namespace="team-a",
        pod="trainer",
        container="main",
        claim="c1",
        physicalgpu="node-a-0",
        uuid="GPU-aaaa",
        attribution=ATTRIBUTED,
    )
    row = UsageRow(key=key, processes=2, memory_bytes=memory, sm_percent=sm)
    return UsageSample(taken_at=TAKEN_AT, rows=(row,), devices=(DEVICE,))


@pytest.fixture
def client(mocker: MockerFixture) -> MockType:
    """The client the writer makes for its own field manager, which does its requests."""
    own: MockType = mocker.Mock(spec=KubeClient)
    mocker.patch("pkg.gpuhandler.attribution.claim_status.KubeClient", return_value=own)
    return own


@pytest.fixture
def clock() -> list[float]:
    return [0.0]


@pytest.fixture
def writer(client: MockType, clock: list[float], mocker: MockerFixture) -> ClaimUsageWriter:
    return ClaimUsageWriter(
        client=mocker.Mock(spec=KubeClient), clock=lambda: clock[0], min_interval=30, refresh=300
    )


def test_it_writes_through_the_handed_connection_under_a_field_manager_of_its_own(
    mocker: MockerFixture,
) -> None:
    make = mocker.patch("pkg.gpuhandler.attribution.claim_status.KubeClient")
    handed = mocker.Mock(spec=KubeClient)
    ClaimUsageWriter(client=handed, clock=lambda: 0.0)
    make.assert_called_once_with(handed.api_client, field_manager=FIELD_MANAGER)
    assert FIELD_MANAGER == "gpu-handler-usage"


def test_a_claim_gets_one_status_apply_naming_its_uid_and_its_entries(
    writer: ClaimUsageWriter, client: MockType
) -> None:
    writer.write(sample())
    client.apply.assert_called_once()
    kind, body = client.apply.call_args.args
    assert kind is RESOURCE_CLAIM
    assert client.apply.call_args.kwargs == {"subresource": "status"}
    assert body["metadata"] == {"name": "c1", "namespace": "team-a", "uid": "uid-1"}
    [entry] = body["status"]["devices"]
    assert {k: entry[k] for k in ("driver", "pool", "device", "shareID")} == {
        "driver": "gpu.deckhouse.io",
        "pool": "node-a",
        "device": "gpu-0-share",
        "shareID": "s1",
    }
    data = entry["data"]
    assert (data["kind"], data["memoryUsedBytes"], data["smUtilizationPercent"]) == (
        "DeviceUsage",
        1 << 30,
        30,
    )


def test_it_writes_again_only_on_a_material_change_after_the_interval_or_on_refresh(
    writer: ClaimUsageWriter, client: MockType, clock: list[float]
) -> None:
    writer.write(sample())
    clock[0] = 10.0
    writer.write(sample(sm=90))  # changed, but within min_interval
    clock[0] = 40.0
    writer.write(sample(sm=32))  # past the interval, but an immaterial change
    assert client.apply.call_count == 1
    writer.write(sample(sm=90))  # material
    assert client.apply.call_count == 2
    clock[0] = 340.0
    writer.write(sample(sm=90))  # unchanged, but refresh-old
    assert client.apply.call_count == 3


def test_a_failed_write_backs_off_then_retries(
    writer: ClaimUsageWriter, client: MockType, clock: list[float]
) -> None:
    client.apply.side_effect = [ApiError(status=500, reason="InternalError", message="boom"), None]
    writer.write(sample())  # logged, not raised
    clock[0] = 4.0
    writer.write(sample())
    assert client.apply.call_count == 1  # still backing off (5 s first)
    clock[0] = 5.0
    writer.write(sample())
    assert client.apply.call_count == 2


OTHER = PreparedDevice(
    namespace="team-b",
    claim="c2",
    claim_uid="uid-2",
    pool="node-a",
    device="gpu-1",
    share_id=None,
    card="0000:3c:00.0",
    physicalgpu="node-a-1",
    uuid="GPU-bbbb",
)


def with_devices(*devices: PreparedDevice) -> UsageSample:
    return replace(sample(), devices=devices)


def applied_uids(client: MockType) -> list[str]:
    return [call.args[1]["metadata"]["uid"] for call in client.apply.call_args_list]


@pytest.mark.parametrize(
    "gone",
    [
        NotFoundError(status=404, reason="NotFound", message="claim c1 not found"),
        ConflictError(
            status=409, reason="Conflict", message="Precondition failed: UID in precondition: uid-1"
        ),
    ],
    ids=["deleted", "replaced"],
)
def test_a_claim_gone_from_the_api_is_not_written_again_while_it_stays_prepared(
    writer: ClaimUsageWriter, client: MockType, clock: list[float], gone: ApiError
) -> None:
    """No retry can succeed (a uid never comes back); the other claims are written as before."""

    def apply(kind: object, body: dict[str, Any], **_: object) -> None:
        if body["metadata"]["uid"] == "uid-1":
            raise gone

    client.apply.side_effect = apply
    writer.write(with_devices(DEVICE, OTHER))
    for now in (5.0, 40.0, 400.0, 4000.0):  # past any backoff, the interval and the refresh
        clock[0] = now
        writer.write(with_devices(DEVICE, OTHER))
    assert applied_uids(client) == ["uid-1", "uid-2", "uid-2", "uid-2"]  # uid-2: first, 400 s, 4000 s


def test_a_gone_claims_entry_goes_when_it_is_no_longer_prepared(
    writer: ClaimUsageWriter, client: MockType, clock: list[float]
) -> None:
    client.apply.side_effect = [NotFoundError(status=404, reason="NotFound", message="gone"), None]
    writer.write(with_devices(DEVICE))
    clock[0] = 1.0
    writer.write(with_devices())  # unprepared: everything known about it is forgotten
    writer.write(with_devices(DEVICE))
    assert applied_uids(client) == ["uid-1", "uid-1"]


def test_any_other_api_error_is_retried(
    writer: ClaimUsageWriter, client: MockType, clock: list[float]
) -> None:
    client.apply.side_effect = [ApiError(status=403, reason="Forbidden", message="no"), None]
    writer.write(sample())
    clock[0] = 5.0
    writer.write(sample())
    assert client.apply.call_count == 2
