"""The claim writer's requests to the API client: which calls, with which bodies, and how 404/409
answers become the results a handler acts on (None, :class:`ConflictRequeue`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationConfiguration,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture

from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US, DELETE_PROTECTION_FINALIZER
from pkg.dracontroller.internal.service.claim_writer import ClaimWriter
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.framework.client import ConflictError, InvalidError, KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.reconcile import ConflictRequeue

ALLOCATION = V1AllocationResult(
    devices=V1DeviceAllocationResult(
        results=[
            V1DeviceRequestAllocationResult(request="gpu", driver="gpu.deckhouse.io", pool="p", device="d")
        ]
    )
)


PARAMETERS = {
    "apiVersion": "gpu.deckhouse.io/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}},
}
CONFIGURED = V1AllocationResult(
    devices=V1DeviceAllocationResult(
        results=[
            V1DeviceRequestAllocationResult(
                request="gpu",
                driver="gpu.deckhouse.io",
                pool="p",
                device="d",
                share_id="s-1",
                consumed_capacity={"sharePercent": "50"},
            )
        ],
        config=[
            V1DeviceAllocationConfiguration(
                source="FromClaim",
                opaque=V1OpaqueDeviceConfiguration(driver="gpu.deckhouse.io", parameters=PARAMETERS),
            )
        ],
    )
)
NOW = datetime(2026, 3, 1, 10, 20, 30, 456789, tzinfo=UTC)
STAMP = {"allocationTimestamp": "2026-03-01T10:20:30Z"}
ALLOCATION_JSON = {
    "devices": {"results": [{"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "p", "device": "d"}]}
}


def claim(
    version: str, *, annotations: dict[str, str] | None = None, allocated: bool = False
) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(
            name="c", namespace="ns", uid="u", resource_version=version, annotations=annotations,
            finalizers=[DELETE_PROTECTION_FINALIZER] if allocated else None,
        ),
        spec=V1ResourceClaimSpec(),
        status=V1ResourceClaimStatus(allocation=ALLOCATION) if allocated else None,
    )  # fmt: skip


@pytest.fixture
def client(mocker: MockerFixture) -> Any:
    return mocker.create_autospec(KubeClient, instance=True)


def test_allocate_patches_the_mark_then_the_allocation_each_under_a_version_test(
    client: Any, mocker: MockerFixture
) -> None:
    written_claim = claim("7", annotations={ALLOCATED_BY: ALLOCATED_BY_US}, allocated=True)
    client.patch.side_effect = [claim("6", annotations={ALLOCATED_BY: ALLOCATED_BY_US}), written_claim]
    in_flight = InFlight()

    written = ClaimWriter(client, in_flight, clock=lambda: NOW).allocate(claim("5"), ALLOCATION)

    assert written is written_claim
    assert client.patch.call_args_list == [
        mocker.call(
            RESOURCE_CLAIM,
            "c",
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
                {"op": "add", "path": "/metadata/finalizers", "value": [DELETE_PROTECTION_FINALIZER]},
                {"op": "add", "path": "/metadata/annotations", "value": {ALLOCATED_BY: ALLOCATED_BY_US}},
            ],
            patch_type=PatchType.JSON,
            namespace="ns",
        ),
        mocker.call(
            RESOURCE_CLAIM,
            "c",
            [
                # the version the metadata patch returned, not the one read
                {"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
                {"op": "add", "path": "/status/allocation", "value": ALLOCATION_JSON | STAMP},
            ],
            patch_type=PatchType.JSON,
            namespace="ns",
            subresource="status",
        ),
    ]
    client.update_status.assert_not_called()  # a PUT would store the parameters' bytes as sent
    assert in_flight.resolve(claim("5")) is written  # the caches' older versions are superseded


def test_the_allocation_carries_its_time_so_the_scheduler_does_not_stamp_it_later(client: Any) -> None:
    """A kube-scheduler with DRADeviceBindingConditions stamps an unstamped allocation when it
    reserves the claim, and the API server refuses that change of a set allocation: the Pod of a
    claim we allocated never started."""
    client.patch.side_effect = [claim("6"), claim("7", allocated=True)]

    ClaimWriter(client, InFlight(), clock=lambda: NOW).allocate(claim("5"), ALLOCATION)

    value = client.patch.call_args.args[2][1]["value"]
    assert value["allocationTimestamp"] == "2026-03-01T10:20:30Z"  # whole seconds, as the API keeps it


def test_the_allocation_is_sent_as_the_api_spells_it_opaque_parameters_included(client: Any) -> None:
    client.patch.side_effect = [claim("6"), claim("7", allocated=True)]

    ClaimWriter(client, InFlight()).allocate(claim("5"), CONFIGURED)

    value = client.patch.call_args.args[2][1]["value"]
    assert value["devices"]["results"][0]["shareID"] == "s-1"
    assert value["devices"]["results"][0]["consumedCapacity"] == {"sharePercent": "50"}
    assert value["devices"]["config"] == [
        {"source": "FromClaim", "opaque": {"driver": "gpu.deckhouse.io", "parameters": PARAMETERS}}
    ]


@pytest.mark.parametrize("failing", ["metadata", "status"])
def test_a_conflict_on_either_write_asks_for_a_requeue(client: Any, failing: str) -> None:
    conflict = ConflictError(status=409, reason="Conflict", message="changed")
    client.patch.side_effect = [conflict] if failing == "metadata" else [claim("6"), conflict]

    with pytest.raises(ConflictRequeue) as raised:
        ClaimWriter(client, InFlight()).allocate(claim("5"), ALLOCATION)

    assert raised.value.key == "ns/c"
    assert raised.value.write == failing


def test_a_failed_version_test_on_the_status_patch_asks_for_a_requeue(client: Any) -> None:
    failed_test = InvalidError(
        status=422, reason="Invalid", message="testing value /metadata/resourceVersion failed"
    )
    client.patch.side_effect = [claim("6"), failed_test]

    with pytest.raises(ConflictRequeue) as raised:
        ClaimWriter(client, InFlight()).allocate(claim("5"), ALLOCATION)

    assert raised.value.write == "status"


def test_an_allocation_the_server_finds_invalid_is_raised_as_is(client: Any) -> None:
    invalid = InvalidError(
        status=422,
        reason="Invalid",
        message="status.allocation.devices.results[0].pool: Required value",
        details={"causes": [{"field": "status.allocation.devices.results[0].pool"}]},
    )
    client.patch.side_effect = [claim("6"), invalid]

    with pytest.raises(InvalidError):
        ClaimWriter(client, InFlight()).allocate(claim("5"), ALLOCATION)


@pytest.mark.parametrize("failing", ["metadata", "status"])
def test_a_claim_gone_on_either_write_is_none(client: Any, failing: str) -> None:
    gone = NotFoundError(status=404, reason="NotFound", message="gone")
    client.patch.side_effect = [gone] if failing == "metadata" else [claim("6"), gone]

    assert ClaimWriter(client, InFlight()).allocate(claim("5"), ALLOCATION) is None


def test_release_puts_the_status_without_allocation_then_removes_only_the_mark(client: Any) -> None:
    marked = claim("5", annotations={ALLOCATED_BY: ALLOCATED_BY_US}, allocated=True)
    client.update_status.return_value = claim("6", annotations={ALLOCATED_BY: ALLOCATED_BY_US})
    client.patch.return_value = claim("7")

    assert ClaimWriter(client, InFlight()).release(marked) is client.patch.return_value

    body = client.update_status.call_args.args[1]
    assert body.status.allocation is None
    assert body.status.devices is None
    client.patch.assert_called_once_with(
        RESOURCE_CLAIM,
        "c",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
            {"op": "remove", "path": "/metadata/annotations"},
        ],
        patch_type=PatchType.JSON,
        namespace="ns",
    )


def test_forget_mark_of_an_unmarked_claim_sends_nothing(client: Any) -> None:
    unmarked = claim("5")

    assert ClaimWriter(client, InFlight()).forget_mark(unmarked) is unmarked
    assert client.method_calls == []
