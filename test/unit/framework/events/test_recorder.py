"""EventRecorderLogger: Event shape, correlation, spam filter, and never blocking or raising."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import EventsV1Event, V1Namespace, V1ObjectMeta, V1Pod

from pkg.framework.client import ApiError, NotFoundError, PatchType, ResourceKind
from pkg.framework.client.builtin_kinds import EVENT, NAMESPACE, POD
from pkg.framework.events import EventRecorderLogger


class FakeEventClient:
    def __init__(self) -> None:
        self.created: list[EventsV1Event] = []
        self.patches: list[tuple[str, str | None, dict[str, Any]]] = []
        self.fail: Exception | None = None
        self.gone: set[str] = set()
        self.gate = threading.Event()
        self.gate.set()

    def create(
        self, kind: ResourceKind[EventsV1Event], obj: EventsV1Event, namespace: str | None = None
    ) -> EventsV1Event:
        self.gate.wait()
        if self.fail is not None:
            raise self.fail
        EVENT.encode(obj)  # the event must serialise
        self.created.append(obj)
        return obj

    def patch(
        self,
        kind: ResourceKind[EventsV1Event],
        name: str,
        patch: Any,
        *,
        patch_type: PatchType,
        namespace: str | None = None,
    ) -> EventsV1Event:
        assert patch_type is PatchType.MERGE
        if name in self.gone:
            raise NotFoundError(status=404, reason="NotFound", message="expired")
        self.patches.append((name, namespace, patch))
        return next(e for e in self.created if e.metadata is not None and e.metadata.name == name)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


Setup = tuple[EventRecorderLogger, FakeEventClient, FakeClock]


@pytest.fixture
def setup() -> Iterator[Setup]:
    client, clock = FakeEventClient(), FakeClock()
    recorder = EventRecorderLogger(
        client=client,
        reporting_controller="gpu.deckhouse.io/gpu-controller",
        reporting_instance="gpu-controller-node-1",
        clock=clock,
        now=lambda: datetime(2025, 1, 1, tzinfo=UTC),
    )
    yield recorder, client, clock
    recorder.stop()


def pod(name: str = "trainer") -> V1Pod:
    return V1Pod(api_version="v1", kind="Pod", metadata=V1ObjectMeta(name=name, namespace="ml", uid="u-1"))


def drain(recorder: EventRecorderLogger) -> None:
    recorder.stop(timeout=2)


def test_records_an_events_v1_event_about_the_object(setup: Setup) -> None:
    recorder, client, _ = setup
    recorder.event(pod(), type_="Warning", reason="PrepareFailed", message="no free MIG slice")
    drain(recorder)
    (event,) = client.created
    assert event.metadata is not None
    assert event.metadata.namespace == "ml"
    assert str(event.metadata.name).startswith("trainer.")
    assert (event.type, event.reason, event.action, event.note) == (
        "Warning",
        "PrepareFailed",
        "PrepareFailed",
        "no free MIG slice",
    )
    assert (event.reporting_controller, event.reporting_instance) == (
        "gpu.deckhouse.io/gpu-controller",
        "gpu-controller-node-1",
    )
    assert event.regarding is not None
    assert (event.regarding.api_version, event.regarding.kind, event.regarding.name) == (
        "v1",
        "Pod",
        "trainer",
    )
    assert event.regarding.uid == "u-1"
    assert EVENT.encode(event)["eventTime"] == "2025-01-01T00:00:00.000001Z"  # six digits, as MicroTime wants


def test_kind_comes_from_a_resource_kind_when_the_model_lacks_it(setup: Setup) -> None:
    recorder, client, _ = setup
    namespace = V1Namespace(metadata=V1ObjectMeta(name="ml"))  # list items carry no kind
    recorder.event(
        namespace, type_="Normal", reason="Seen", message="hello", kind=NAMESPACE, action="Observe"
    )
    drain(recorder)
    (event,) = client.created
    assert event.regarding is not None
    assert (event.regarding.kind, event.regarding.api_version) == ("Namespace", "v1")
    assert event.metadata is not None
    assert event.metadata.namespace == "default"  # events of cluster-scoped objects
    assert event.action == "Observe"


def test_object_without_kind_is_logged_not_raised(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    recorder, client, _ = setup
    recorder.event(V1Pod(metadata=V1ObjectMeta(name="x")), type_="Normal", reason="R", message="m")
    drain(recorder)
    assert client.created == []
    assert "cannot record event" in caplog.text


def test_repeats_within_the_window_patch_the_series(setup: Setup) -> None:
    recorder, client, clock = setup
    for _ in range(3):
        recorder.event(pod(), type_="Normal", reason="Ready", message="card ready", kind=POD)
        clock.t += 60
    drain(recorder)
    assert len(client.created) == 1
    name = client.created[0].metadata.name if client.created[0].metadata else None
    counts = [patch["series"]["count"] for _, _, patch in client.patches]
    assert counts == [2, 3]
    assert all(n == name and ns == "ml" for n, ns, _ in client.patches)
    assert client.patches[0][2]["series"]["lastObservedTime"] == "2025-01-01T00:00:00.000001Z"


def test_different_messages_and_stale_repeats_create_new_events(setup: Setup) -> None:
    recorder, client, clock = setup
    recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    recorder.event(pod(), type_="Normal", reason="Ready", message="card 2 ready")
    recorder.event(pod("other"), type_="Normal", reason="Ready", message="card ready")
    assert recorder.flush()
    clock.t += 601  # past the correlation window
    recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    drain(recorder)
    assert len(client.created) == 4
    assert client.patches == []


def test_an_expired_event_starts_a_new_series(setup: Setup) -> None:
    recorder, client, _ = setup
    recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    assert recorder.flush()
    client.gone = {e.metadata.name for e in client.created if e.metadata and e.metadata.name}
    recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    drain(recorder)
    assert len(client.created) == 2


def test_spam_filter_drops_past_the_burst_and_refills_slowly(setup: Setup) -> None:
    recorder, client, clock = setup
    for i in range(30):
        recorder.event(pod(), type_="Warning", reason="Flap", message=f"flap {i}")
    recorder.event(pod("calm"), type_="Normal", reason="Ready", message="other objects are unaffected")
    assert recorder.flush()
    assert len(client.created) == 26
    clock.t += 300  # one token back
    recorder.event(pod(), type_="Warning", reason="Flap", message="flap 30")
    recorder.event(pod(), type_="Warning", reason="Flap", message="flap 31")
    drain(recorder)
    assert [e.note for e in client.created[-2:]] == ["other objects are unaffected", "flap 30"]


def test_repeats_dropped_by_the_spam_filter_still_count() -> None:
    client, clock = FakeEventClient(), FakeClock()
    recorder = EventRecorderLogger(
        client=client, reporting_controller="c", reporting_instance="i", burst=2, clock=clock
    )
    for _ in range(3):  # create, patch (count 2), dropped (count 3)
        recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    assert recorder.flush()
    clock.t += 300
    recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    drain(recorder)
    assert [patch["series"]["count"] for _, _, patch in client.patches] == [2, 4]


def test_send_errors_are_logged_never_raised(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    recorder, client, _ = setup
    client.fail = ApiError(status=403, reason="Forbidden", message="cannot create events")
    recorder.event(pod(), type_="Normal", reason="Ready", message="card ready")
    drain(recorder)
    assert "sending event failed" in caplog.text


def test_never_blocks_a_full_queue_drops_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeEventClient()
    client.gate.clear()  # the API hangs
    recorder = EventRecorderLogger(
        client=client, reporting_controller="c", reporting_instance="i", queue_size=2
    )
    began = time.monotonic()
    for i in range(10):
        recorder.event(pod(), type_="Normal", reason="Ready", message=f"m{i}")
    assert time.monotonic() - began < 0.5
    assert "event queue full" in caplog.text
    client.gate.set()
    recorder.stop(timeout=2)
    assert 2 <= len(client.created) <= 3  # the two queued, plus the one in flight if taken


def test_every_event_is_logged_with_the_object(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    recorder, _, _ = setup
    with caplog.at_level(logging.INFO, logger="pkg.framework.events.recorder"):
        recorder.event(pod(), type_="Warning", reason="PrepareFailed", message="no free MIG slice")
    record = next(r for r in caplog.records if r.getMessage() == "no free MIG slice")
    assert record.levelno == logging.WARNING
    assert vars(record)["object_kind"] == "Pod"
    assert vars(record)["object_name"] == "trainer"
    assert vars(record)["object_namespace"] == "ml"
    assert vars(record)["reason"] == "PrepareFailed"


def test_events_after_stop_are_only_logged(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    recorder, client, _ = setup
    recorder.stop()
    recorder.event(pod(), type_="Normal", reason="Ready", message="late")
    assert client.created == []
    assert "event recorder stopped" in caplog.text
