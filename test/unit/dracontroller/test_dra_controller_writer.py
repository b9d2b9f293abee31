"""The claim writer's requests: their shape, their order and how conflicts surface."""

from __future__ import annotations

import pytest
from kubernetes.client import (
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ResourceClaimStatus,
)
from testutil.k8s_fields import allocation_of, annotations_of, meta, present, status_of
from testutil.unit.dra.allocator.alloc_builders import claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import FakeClaimApi

from pkg.dracontroller.internal.names import ALLOCATED_BY, DELETE_PROTECTION_FINALIZER
from pkg.dracontroller.internal.service import ClaimWriter, InFlight
from pkg.framework.client import InvalidError
from pkg.framework.reconcile import ConflictRequeue

ALLOCATION = V1AllocationResult(
    devices=V1DeviceAllocationResult(
        results=[
            V1DeviceRequestAllocationResult(request="gpu", driver="gpu.deckhouse.io", pool="p", device="d")
        ]
    )
)


def setup() -> tuple[FakeClaimApi, ClaimWriter, InFlight]:
    api, in_flight = FakeClaimApi(), InFlight()
    return api, ClaimWriter(api, in_flight), in_flight  # type: ignore[arg-type]


def test_allocate_patches_metadata_then_the_status_from_the_patched_version() -> None:
    api, writer, in_flight = setup()
    c = api.put(claim("c", exact("gpu", "x")))
    written = writer.allocate(c, ALLOCATION)
    (verb1, _, ops), (verb2, _, status_ops) = api.writes
    assert verb1 == "patch"
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta(c).resource_version},
        {"op": "add", "path": "/metadata/finalizers", "value": [DELETE_PROTECTION_FINALIZER]},
        {"op": "add", "path": "/metadata/annotations", "value": {ALLOCATED_BY: "gpu-dra-controller"}},
    ]
    assert verb2 == "status"
    assert status_ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "101"}  # patched
    assert status_ops[1]["path"] == "/status/allocation"
    assert written is not None
    assert allocation_of(written).devices == ALLOCATION.devices
    assert allocation_of(written).allocation_timestamp is not None
    # The cache still holds the version we decided on: readers must see the written claim.
    assert in_flight.resolve(c) is written


def test_allocate_keeps_reserved_for_and_other_status() -> None:
    api, writer, _ = setup()
    c = claim("c", exact("gpu", "x"))
    c.status = V1ResourceClaimStatus(devices=None)
    c = api.put(c)
    assert allocation_of(present(writer.allocate(c, ALLOCATION))).devices == ALLOCATION.devices


def test_a_failed_resource_version_test_is_a_conflict() -> None:
    api, writer, _ = setup()
    c = api.put(claim("c", exact("gpu", "x")))
    api.put(c)  # bumps the version behind the writer's back
    with pytest.raises(ConflictRequeue) as caught:
        writer.allocate(c, ALLOCATION)
    assert caught.value.write == "metadata"
    assert [w[0] for w in api.writes] == ["patch"]


def test_a_real_validation_error_is_not_a_conflict() -> None:
    api, writer, _ = setup()
    c = api.put(claim("c", exact("gpu", "x")))
    causes = {"causes": [{"field": "status.allocation", "message": "bad"}]}
    api.fail_next.append(InvalidError(status=422, reason="Invalid", message="bad", details=causes))
    with pytest.raises(InvalidError):
        writer.allocate(c, ALLOCATION)


def test_a_status_conflict_after_the_patch() -> None:
    api, writer, _ = setup()
    c = api.put(claim("c", exact("gpu", "x")))
    key = next(iter(api.objects))

    def bump() -> None:  # another writer changes the claim between our two writes
        api.on_write.clear()
        api.put(api.get(key))

    api.on_write.append(bump)
    with pytest.raises(ConflictRequeue) as caught:
        writer.allocate(c, ALLOCATION)
    assert caught.value.write == "status"
    assert "allocation" not in (api.objects[key].get("status") or {})  # nothing written


def test_gone_claims_return_none() -> None:
    _, writer, _ = setup()
    c = claim("gone", exact("gpu", "x"))
    meta(c).resource_version = "1"
    assert writer.allocate(c, ALLOCATION) is None
    assert writer.release(c) is None


def test_release_clears_allocation_then_the_mark_and_keeps_the_finalizer() -> None:
    api, writer, in_flight = setup()
    c = api.put(claim("c", exact("gpu", "x")))
    allocated = writer.allocate(c, ALLOCATION)
    api.writes.clear()
    released = present(writer.release(present(allocated)))
    assert [w[0] for w in api.writes] == ["status", "patch"]
    assert api.writes[0][2].status.allocation is None
    assert status_of(released).allocation is None
    assert ALLOCATED_BY not in annotations_of(released)
    assert meta(released).finalizers == [DELETE_PROTECTION_FINALIZER]
    assert status_of(in_flight.resolve(present(allocated))).allocation is None


def test_forget_mark_without_a_mark_writes_nothing() -> None:
    api, writer, _ = setup()
    c = api.put(claim("c", exact("gpu", "x")))
    assert writer.forget_mark(c) is c
    assert api.writes == []
