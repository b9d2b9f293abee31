"""The hand-over Event: one ``Normal LeftToScheduler`` per claim, saying which Pod and how found."""

from __future__ import annotations

from typing import Any

from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta, V1ResourceClaimSpec
from pytest_mock import MockerFixture

from pkg.dracontroller.internal.names import REASON_LEFT_TO_SCHEDULER
from pkg.dracontroller.internal.service.handover import FoundBy, Handover
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger


def claim(uid: str) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=uid, namespace="ns", uid=uid), spec=V1ResourceClaimSpec()
    )


def recorder(mocker: MockerFixture) -> Any:
    return mocker.create_autospec(EventRecorderLogger, instance=True)


def test_the_event_names_the_pod_and_the_scheduler(mocker: MockerFixture) -> None:
    events = recorder(mocker)
    c = claim("u1")

    Handover(recorder=events).left_to_scheduler(c, ["ns/p1", "ns/p2"], found=FoundBy.CACHE)

    events.event.assert_called_once_with(
        c,
        type_="Normal",
        reason=REASON_LEFT_TO_SCHEDULER,
        message=(
            "referenced by pod ns/p1 and 1 more: the kube-scheduler allocates this claim on a node where "
            "the Pod can run"
        ),
        kind=RESOURCE_CLAIM,
    )


def test_the_message_says_how_the_pod_was_found(mocker: MockerFixture) -> None:
    events = recorder(mocker)

    Handover(recorder=events).left_to_scheduler(claim("u1"), ["ns/p1"], found=FoundBy.READ_AFTER_WRITE)

    assert "the allocation was given back" in events.event.call_args.kwargs["message"]


def test_a_claim_is_told_once_until_forgotten_for_newer_ones(mocker: MockerFixture) -> None:
    events = recorder(mocker)
    handover = Handover(recorder=events, capacity=2)

    for uid in ("a", "a", "b", "a", "c", "b"):
        handover.left_to_scheduler(claim(uid), ["ns/p"], found=FoundBy.CACHE)

    # "a" was told most recently when "c" came, so "b" was forgotten and is told again.
    assert [call.args[0].metadata.uid for call in events.event.call_args_list] == ["a", "b", "c", "b"]
