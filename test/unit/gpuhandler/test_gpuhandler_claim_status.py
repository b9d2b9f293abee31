"""The applier as a service: one status apply per claim under its own field manager, naming the
claim's uid and all our entries; 404/409 make a claim gone, other failures back off per claim; a
server that drops status.devices turns it off, said once; a failure's unknown devices are read from
the claim's allocation (our driver, this node's pool)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocatedDeviceStatus,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture, MockType

from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.client.errors import ApiError, ConflictError, InvalidError, NotFoundError
from pkg.gpuhandler.attribution.claim_status import FIELD_MANAGER, ClaimStatusWriter, Outcome
from pkg.gpuhandler.attribution.status_book import ClaimEntries
from pkg.gpuhandler.preparation.services import DeviceKey

POOL = "gpus/node-a"
ENTRY: dict[str, Any] = {
    "driver": DRIVER,
    "pool": POOL,
    "device": "gpu-0",
    "data": {"kind": "DeviceStatusData"},
}


def entries(*entry: dict[str, Any], unresolved: bool = False) -> ClaimEntries:
    return ClaimEntries(
        namespace="team",
        name="c1",
        uid="uid-1",
        generation=1,
        entries=tuple(entry),
        unresolved=unresolved,
        failure=("NodeLockTimeout", "waited") if unresolved else None,
    )


def answer(*devices: tuple[str, str, str, str | None]) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name="c1", namespace="team", uid="uid-1"),
        status=V1ResourceClaimStatus(
            devices=[
                V1AllocatedDeviceStatus(driver=d, pool=p, device=n, share_id=s) for d, p, n, s in devices
            ]
        ),
    )


@pytest.fixture
def client(mocker: MockerFixture) -> MockType:
    own: MockType = mocker.Mock(spec=KubeClient)
    own.apply.return_value = answer((DRIVER, POOL, "gpu-0", None))
    mocker.patch("pkg.gpuhandler.attribution.claim_status.KubeClient", return_value=own)
    return own


@pytest.fixture
def clock() -> list[float]:
    return [0.0]


@pytest.fixture
def writer(client: MockType, clock: list[float], mocker: MockerFixture) -> ClaimStatusWriter:
    return ClaimStatusWriter(client=mocker.Mock(spec=KubeClient), pool=POOL, clock=lambda: clock[0])


def test_it_writes_under_one_field_manager_kept_from_the_usage_only_release(mocker: MockerFixture) -> None:
    make = mocker.patch("pkg.gpuhandler.attribution.claim_status.KubeClient")
    handed = mocker.Mock(spec=KubeClient)
    ClaimStatusWriter(client=handed, pool=POOL, clock=lambda: 0.0)
    make.assert_called_once_with(handed.api_client, field_manager=FIELD_MANAGER)
    assert FIELD_MANAGER == "gpu-handler-usage"


def test_a_claim_gets_one_status_apply_with_its_uid_and_all_its_entries(
    writer: ClaimStatusWriter, client: MockType
) -> None:
    assert writer.write(entries(ENTRY)).outcome is Outcome.WRITTEN
    client.apply.assert_called_once_with(
        RESOURCE_CLAIM,
        {
            "metadata": {"name": "c1", "namespace": "team", "uid": "uid-1"},
            "status": {"devices": [ENTRY]},
        },
        subresource="status",
    )


def test_removal_applies_an_empty_list_and_is_not_taken_for_a_disabled_field(
    writer: ClaimStatusWriter, client: MockType
) -> None:
    client.apply.return_value = answer(("other.example.com", "x", "y", None))
    assert writer.write(entries()).outcome is Outcome.WRITTEN
    assert client.apply.call_args.args[1]["status"] == {"devices": []}
    assert not writer.disabled


@pytest.mark.parametrize(
    "error",
    [
        NotFoundError(status=404, reason="NotFound", message="gone"),
        ConflictError(status=409, reason="Conflict", message="uid"),
    ],
)
def test_a_claim_the_api_no_longer_has_is_gone(
    writer: ClaimStatusWriter, client: MockType, error: ApiError
) -> None:
    client.apply.side_effect = error
    assert writer.write(entries(ENTRY)).outcome is Outcome.GONE


def test_other_failures_back_off_per_claim_doubling_up_to_the_cap(
    writer: ClaimStatusWriter, client: MockType, clock: list[float]
) -> None:
    client.apply.side_effect = ApiError(status=500, reason="InternalError", message="boom")
    assert writer.write(entries(ENTRY)).outcome is Outcome.LATER
    assert writer.retry_at("uid-1") == 5.0
    clock[0] = 4.0
    assert writer.write(entries(ENTRY)).outcome is Outcome.LATER
    assert client.apply.call_count == 1  # still backing off: the API is not asked
    clock[0] = 5.0
    writer.write(entries(ENTRY))
    assert writer.retry_at("uid-1") == 15.0  # 10 s more
    for _ in range(10):
        clock[0] = writer.retry_at("uid-1")
        writer.write(entries(ENTRY))
    assert writer.retry_at("uid-1") - clock[0] == 300.0
    client.apply.side_effect = None
    clock[0] = writer.retry_at("uid-1")
    assert writer.write(entries(ENTRY)).outcome is Outcome.WRITTEN
    assert writer.retry_at("uid-1") == 0.0


def test_an_allocation_whose_stored_bytes_refuse_every_write_waits_the_cap_and_says_why(
    writer: ClaimStatusWriter, client: MockType, clock: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    client.apply.side_effect = InvalidError(
        status=422,
        reason="Invalid",
        message='ResourceClaim.resource.k8s.io "c1" is invalid: status.allocation: Invalid value: null: '
        "field cannot be modified once set",
    )
    with caplog.at_level(logging.WARNING, logger="pkg.gpuhandler.attribution.claim_status"):
        assert writer.write(entries(ENTRY)).outcome is Outcome.LATER
    assert writer.retry_at("uid-1") == 300.0  # not 5 s: nothing changes until the claim is released
    [said] = caplog.records
    assert "team/c1" in said.getMessage()
    assert "opaque parameters stored with whitespace" in said.getMessage()


def test_another_invalid_answer_backs_off_as_usual_without_that_explanation(
    writer: ClaimStatusWriter, client: MockType, caplog: pytest.LogCaptureFixture
) -> None:
    client.apply.side_effect = InvalidError(
        status=422, reason="Invalid", message="status.devices[0].data: Invalid value: too long"
    )
    with caplog.at_level(logging.WARNING, logger="pkg.gpuhandler.attribution.claim_status"):
        writer.write(entries(ENTRY))
    assert writer.retry_at("uid-1") == 5.0
    assert "whitespace" not in caplog.records[0].getMessage()


def test_a_server_that_drops_the_field_turns_writing_off_and_says_so_once(
    writer: ClaimStatusWriter, client: MockType, caplog: pytest.LogCaptureFixture
) -> None:
    client.apply.return_value = answer()  # the gate is off: the server pruned status.devices
    with caplog.at_level(logging.INFO, logger="pkg.gpuhandler.attribution.claim_status"):
        assert writer.write(entries(ENTRY)).outcome is Outcome.DISABLED
        assert writer.write(entries(ENTRY)).outcome is Outcome.DISABLED
    assert client.apply.call_count == 1
    said = [r for r in caplog.records if "DRAResourceClaimDeviceStatus" in r.getMessage()]
    assert len(said) == 1
    assert said[0].levelno == logging.INFO


def test_a_failure_before_its_devices_were_known_reads_them_from_the_allocation(
    writer: ClaimStatusWriter, client: MockType
) -> None:
    def result(
        driver: str, pool: str, device: str, share: str | None = None
    ) -> V1DeviceRequestAllocationResult:
        return V1DeviceRequestAllocationResult(
            driver=driver, pool=pool, device=device, request="r", share_id=share
        )

    client.get.return_value = ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name="c1", namespace="team", uid="uid-1"),
        status=V1ResourceClaimStatus(
            allocation=V1AllocationResult(
                devices=V1DeviceAllocationResult(
                    results=[
                        result(DRIVER, POOL, "gpu-0-share", "s1"),
                        result(DRIVER, "gpus/node-b", "gpu-0"),
                        result("other.example.com", POOL, "nic-0"),
                    ]
                )
            )
        ),
    )
    got = writer.write(entries(unresolved=True))
    assert got.outcome is Outcome.RESOLVED
    assert got.devices == (DeviceKey(POOL, "gpu-0-share", "s1"),)
    client.apply.assert_not_called()


def test_an_unresolved_claim_whose_name_has_another_uid_is_gone(
    writer: ClaimStatusWriter, client: MockType
) -> None:
    client.get.return_value = ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name="c1", namespace="team", uid="new")
    )
    assert writer.write(entries(unresolved=True)).outcome is Outcome.GONE
