"""The status book: Ready and Healthy as metav1.Conditions whose lastTransitionTime moves only with
the status, a failure's bounded message, health following the card's verdict and its recovery,
usage joined to the identity, removal on Unprepare, and pending/settle by generation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.gpu.v1alpha1 import DeviceStatusData, UsageFigures
from pkg.domain.names import DRIVER
from pkg.gpuhandler.attribution.status_book import MAX_MESSAGE_CHARS, DeviceIdentity, DeviceStatusBook
from pkg.gpuhandler.health import CardHealth, HealthLevel
from pkg.gpuhandler.preparation.services import DeviceKey

T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
CARD = "0000:3b:00.0"
KEY = DeviceKey("gpus/node-a", "gpu-0-share", "s1")
IDENTITY = DeviceIdentity(key=KEY, card=CARD, data=DeviceStatusData(physical_gpu="node-a-0", uuid="GPU-aaaa"))


def healthy(at: datetime = T0) -> CardHealth:
    return CardHealth(level=HealthLevel.HEALTHY, reason="Healthy", message="", since=at)


def fatal(at: datetime) -> CardHealth:
    return CardHealth(
        level=HealthLevel.FATAL, reason="XidCritical", message="Xid 79: fallen off the bus", since=at
    )


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def verdicts() -> dict[str, CardHealth]:
    return {CARD: healthy()}


@pytest.fixture
def book(clock: Clock, verdicts: dict[str, CardHealth]) -> DeviceStatusBook:
    return DeviceStatusBook(verdicts=lambda: verdicts, now=clock)


def only_entry(book: DeviceStatusBook) -> dict[str, Any]:
    [claim] = book.pending()
    [entry] = claim.entries
    return entry


def conditions(entry: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in entry["conditions"]}


def prepare(book: DeviceStatusBook) -> None:
    book.prepared(namespace="team", name="c1", uid="uid-1", devices=[IDENTITY])


def fail(book: DeviceStatusBook, reason: str = "DoubleAllocation", message: str = "taken") -> None:
    book.failed(namespace="team", name="c1", uid="uid-1", devices=[KEY], reason=reason, message=message)


def test_a_prepared_device_is_ready_and_healthy_with_its_identity_under_our_driver(
    book: DeviceStatusBook,
) -> None:
    prepare(book)
    entry = only_entry(book)
    assert (entry["driver"], entry["pool"], entry["device"], entry["shareID"]) == (
        DRIVER,
        *KEY.__dict__.values(),
    )
    assert conditions(entry) == {
        "Ready": {
            "type": "Ready",
            "status": "True",
            "reason": "Prepared",
            "message": "",
            "lastTransitionTime": "2026-11-29T10:00:00Z",
        },
        "Healthy": {
            "type": "Healthy",
            "status": "True",
            "reason": "Healthy",
            "message": "",
            "lastTransitionTime": "2026-11-29T10:00:00Z",
        },
    }
    assert entry["data"] == {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "DeviceStatusData",
        "physicalGPU": "node-a-0",
        "uuid": "GPU-aaaa",
    }


def test_a_failed_prepare_is_ready_false_with_its_reason_and_no_data(book: DeviceStatusBook) -> None:
    fail(book, "VfioNotAllowed", "claim team/c1: VFIO is not allowed here")
    entry = only_entry(book)
    assert conditions(entry)["Ready"]["status"] == "False"
    assert conditions(entry)["Ready"]["reason"] == "VfioNotAllowed"
    assert conditions(entry)["Ready"]["message"] == "claim team/c1: VFIO is not allowed here"
    assert "Healthy" not in conditions(entry)
    assert "data" not in entry


def test_a_long_message_is_bounded(book: DeviceStatusBook) -> None:
    fail(book, message="x" * 10_000)
    message = conditions(only_entry(book))["Ready"]["message"]
    assert len(message) == MAX_MESSAGE_CHARS
    assert message.endswith("...")


def test_last_transition_time_moves_only_when_the_status_does(book: DeviceStatusBook, clock: Clock) -> None:
    fail(book, "NodeLockTimeout")
    clock.at = T0 + timedelta(minutes=1)
    fail(book, "CheckpointUnreadable")  # still False: a new reason keeps the time
    ready = conditions(only_entry(book))["Ready"]
    assert (ready["reason"], ready["lastTransitionTime"]) == ("CheckpointUnreadable", "2026-11-29T10:00:00Z")
    clock.at = T0 + timedelta(minutes=2)
    prepare(book)  # False → True: the time moves
    ready = conditions(only_entry(book))["Ready"]
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", "2026-11-29T10:02:00Z")
    clock.at = T0 + timedelta(minutes=3)
    prepare(book)  # the kubelet's retry, answered from the record: nothing moves
    assert conditions(only_entry(book))["Ready"]["lastTransitionTime"] == "2026-11-29T10:02:00Z"


def test_health_follows_the_cards_verdict_and_its_recovery(book: DeviceStatusBook) -> None:
    prepare(book)
    broke = T0 + timedelta(minutes=5)
    book.card_health(CARD, fatal(broke))
    health = conditions(only_entry(book))["Healthy"]
    assert (health["status"], health["reason"], health["message"]) == (
        "False",
        "XidCritical",
        "Xid 79: fallen off the bus",
    )
    assert health["lastTransitionTime"] == "2026-11-29T10:05:00Z"
    book.card_health(CARD, healthy(T0 + timedelta(minutes=9)))
    health = conditions(only_entry(book))["Healthy"]
    assert (health["status"], health["reason"], health["lastTransitionTime"]) == (
        "True",
        "Healthy",
        "2026-11-29T10:09:00Z",
    )


def test_another_cards_verdict_leaves_the_device_alone(book: DeviceStatusBook) -> None:
    prepare(book)
    [claim] = book.pending()
    book.settle(claim.uid, claim.generation)
    book.card_health("0000:86:00.0", fatal(T0))
    assert book.pending() == []


def test_a_card_without_a_verdict_yet_is_unknown(
    book: DeviceStatusBook, verdicts: dict[str, CardHealth]
) -> None:
    verdicts.clear()
    prepare(book)
    assert conditions(only_entry(book))["Healthy"]["status"] == "Unknown"


def test_usage_joins_the_identity_in_data(book: DeviceStatusBook) -> None:
    prepare(book)
    book.usage("uid-1", {KEY: UsageFigures(sampled_at=T0, memory_used_bytes=1 << 30)})
    data = only_entry(book)["data"]
    assert data["uuid"] == "GPU-aaaa"
    assert data["usage"] == {
        "sampledAt": "2026-11-29T10:00:00Z",
        "memoryUsedBytes": 1 << 30,
        "containers": [],
    }


def test_usage_of_a_claim_the_book_does_not_hold_is_dropped(book: DeviceStatusBook) -> None:
    book.usage("uid-x", {KEY: UsageFigures(sampled_at=T0, memory_used_bytes=0)})
    assert book.pending() == []


def test_unprepare_sends_no_entries_once_then_forgets_the_claim(book: DeviceStatusBook) -> None:
    prepare(book)
    book.unprepared(uid="uid-1")
    [claim] = book.pending()
    assert claim.entries == ()
    book.settle(claim.uid, claim.generation)
    assert book.pending() == []
    book.usage("uid-1", {KEY: UsageFigures(sampled_at=T0, memory_used_bytes=0)})
    assert book.pending() == []


def test_a_change_while_writing_keeps_the_claim_pending(book: DeviceStatusBook) -> None:
    prepare(book)
    [written] = book.pending()
    book.card_health(CARD, fatal(T0))  # arrives while the loop writes ``written``
    book.settle(written.uid, written.generation)
    [again] = book.pending()
    assert again.generation > written.generation


def test_every_change_wakes_the_loop(book: DeviceStatusBook) -> None:
    assert not book.wake.is_set()
    fail(book)
    assert book.wake.is_set()


def test_a_failure_with_unknown_devices_is_unresolved_until_they_are_given(book: DeviceStatusBook) -> None:
    book.failed(
        namespace="team", name="c1", uid="uid-1", devices=None, reason="NodeLockTimeout", message="waited"
    )
    [claim] = book.pending()
    assert (claim.unresolved, claim.failure, claim.entries) == (True, ("NodeLockTimeout", "waited"), ())
    book.failed(
        namespace="team", name="c1", uid="uid-1", devices=[KEY], reason="NodeLockTimeout", message="waited"
    )
    [claim] = book.pending()
    assert not claim.unresolved
    assert conditions(claim.entries[0])["Ready"]["reason"] == "NodeLockTimeout"
