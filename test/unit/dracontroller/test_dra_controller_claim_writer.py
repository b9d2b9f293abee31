"""The claim writer's requests to the API client: which calls, with which bodies, and how 404/409
answers become the results a handler acts on (None, :class:`ConflictRequeue`)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture

from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US, DELETE_PROTECTION_FINALIZER
from pkg.dracontroller.internal.service.claim_writer import ClaimWriter
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.framework.client import ConflictError, KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.reconcile import ConflictRequeue

ALLOCATION = V1AllocationResult(
    devices=V1DeviceAllocationResult(
        results=[
            V1DeviceRequestAllocationResult(request="gpu", driver="gpu.deckhouse.io", pool="p", device="d")
        ]
    )
)


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


def test_allocate_patches_the_mark_under_a_version_test_then_puts_the_allocation(client: Any) -> None:
    client.patch.return_value = claim("6", annotations={ALLOCATED_BY: ALLOCATED_BY_US})
    client.update_status.return_value = claim(
        "7", annotations={ALLOCATED_BY: ALLOCATED_BY_US}, allocated=True
    )
    in_flight = InFlight()

    written = ClaimWriter(client, in_flight).allocate(claim("5"), ALLOCATION)

    assert written is client.update_status.return_value
    client.patch.assert_called_once_with(
        RESOURCE_CLAIM,
        "c",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
            {"op": "add", "path": "/metadata/finalizers", "value": [DELETE_PROTECTION_FINALIZER]},
            {"op": "add", "path": "/metadata/annotations", "value": {ALLOCATED_BY: ALLOCATED_BY_US}},
        ],
        patch_type=PatchType.JSON,
        namespace="ns",
    )
    kind, body = client.update_status.call_args.args
    assert kind is RESOURCE_CLAIM
    assert body.metadata.resource_version == "6"  # the version the patch returned, not the one read
    assert body.status.allocation == ALLOCATION
    assert in_flight.resolve(claim("5")) is written  # the caches' older versions are superseded


@pytest.mark.parametrize("failing", ["patch", "update_status"])
def test_a_conflict_on_either_write_asks_for_a_requeue(client: Any, failing: str) -> None:
    client.patch.return_value = claim("6")
    getattr(client, failing).side_effect = ConflictError(status=409, reason="Conflict", message="changed")

    with pytest.raises(ConflictRequeue) as raised:
        ClaimWriter(client, InFlight()).allocate(claim("5"), ALLOCATION)

    assert raised.value.key == "ns/c"
    assert raised.value.write == ("metadata" if failing == "patch" else "status")


@pytest.mark.parametrize("failing", ["patch", "update_status"])
def test_a_claim_gone_on_either_write_is_none(client: Any, failing: str) -> None:
    client.patch.return_value = claim("6")
    getattr(client, failing).side_effect = NotFoundError(status=404, reason="NotFound", message="gone")

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
