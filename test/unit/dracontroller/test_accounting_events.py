"""The allocation Events: one per claim and transition on the ResourceClaim, one per claim on each
PhysicalGPU holding its devices; what each says, and on which object."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_mock import MockerFixture, MockType

from pkg.domain.kinds import PHYSICAL_GPU
from pkg.dracontroller.accounting.devices import DeviceFacts, HeldDevice
from pkg.dracontroller.accounting.events import AllocationEvents
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    recorder: MockType = mocker.Mock(spec=EventRecorderLogger)
    return recorder


def held(device: str, *, claim: str = "c1", card: str = "", device_type: str = "physical") -> HeldDevice:
    return HeldDevice(
        key=f"{claim}/{device}",
        claim_uid=f"uid-{claim}",
        namespace="team-a",
        claim=claim,
        request="gpu",
        device=device,
        device_class="a30",
        facts=DeviceFacts(device_type=device_type, node="n1", physical_gpu=card),
        pods=("team-a/p1",),
        allocated_by="gpu-dra-controller",
    )


def emitted(recorder: MockType) -> list[tuple[str, str, str, str, Any]]:
    """(kind, object name, reason, message, kind passed) of each Event, in order."""
    return [
        (
            call.args[0].kind,
            call.args[0].metadata.name,
            call.kwargs["reason"],
            call.kwargs["message"],
            call.kwargs["kind"],
        )
        for call in recorder.event.call_args_list
    ]


def test_an_allocation_is_told_on_its_claim_and_on_each_card_it_holds(recorder: MockType) -> None:
    AllocationEvents(recorder=recorder).created([held("gpu-1", card="n1-b"), held("gpu-0", card="n1-a")])
    assert emitted(recorder) == [
        (
            "ResourceClaim",
            "c1",
            "AllocationCreated",
            "allocated devices gpu-0 (physical, class a30, node n1), gpu-1 (physical, class a30, node n1)"
            " by gpu-dra-controller for pod team-a/p1",
            RESOURCE_CLAIM,
        ),
        (
            "PhysicalGPU",
            "n1-a",
            "AllocationCreated",
            "device gpu-0 (physical, class a30, node n1) allocated to claim team-a/c1 for pod team-a/p1"
            " by gpu-dra-controller",
            PHYSICAL_GPU,
        ),
        (
            "PhysicalGPU",
            "n1-b",
            "AllocationCreated",
            "device gpu-1 (physical, class a30, node n1) allocated to claim team-a/c1 for pod team-a/p1"
            " by gpu-dra-controller",
            PHYSICAL_GPU,
        ),
    ]
    claim = recorder.event.call_args_list[0].args[0]
    assert (claim.api_version, claim.metadata.namespace, claim.metadata.uid) == (
        "resource.k8s.io/v1",
        "team-a",
        "uid-c1",
    )
    assert {call.kwargs["type_"] for call in recorder.event.call_args_list} == {"Normal"}


def test_a_device_without_a_card_is_told_on_its_claim_only(recorder: MockType) -> None:
    AllocationEvents(recorder=recorder).created([held("gpu-0", device_type="")])
    [(kind, _, _, message, _)] = emitted(recorder)
    assert kind == "ResourceClaim"
    assert message.startswith("allocated device gpu-0 (device, class a30, node n1)")


def test_a_release_is_told_per_claim_with_its_longest_hold(recorder: MockType) -> None:
    AllocationEvents(recorder=recorder).released(
        [
            (held("gpu-0", claim="c2"), 30.4),
            (held("gpu-0", claim="c1", card="n1-a"), 10.0),
            (held("gpu-1", claim="c1"), 61.6),
        ]
    )
    assert [(kind, name, reason, message) for kind, name, reason, message, _ in emitted(recorder)] == [
        (
            "ResourceClaim",
            "c1",
            "AllocationReleased",
            "released devices gpu-0 (physical, class a30, node n1), gpu-1 (physical, class a30, node n1)"
            " after 62s",
        ),
        (
            "PhysicalGPU",
            "n1-a",
            "AllocationReleased",
            "device gpu-0 (physical, class a30, node n1) released by claim team-a/c1 after 62s",
        ),
        (
            "ResourceClaim",
            "c2",
            "AllocationReleased",
            "released device gpu-0 (physical, class a30, node n1) after 30s",
        ),
    ]


def test_nothing_to_tell_records_nothing(recorder: MockType) -> None:
    events = AllocationEvents(recorder=recorder)
    events.created([])
    events.released([])
    recorder.event.assert_not_called()
