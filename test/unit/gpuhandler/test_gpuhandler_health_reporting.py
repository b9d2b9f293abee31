"""Health reporting: each verdict change is one Event on the card's PhysicalGPU (a Warning when it
turns unhealthy, Normal when it recovers) and one count by new state and reason; every delivered
health event is counted, recoverable ones included, and records no Event."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.health_events import HealthEvent, Severity
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpuhandler.health import CardHealth, HealthLevel
from pkg.gpuhandler.health.reporting import HealthReporter, events_seen, transitions

SINCE = datetime(2026, 11, 24, 1, 0, 0, tzinfo=UTC)
OTHER_CARD = "0000:5e:00.0"
HEALTHY = CardHealth(level=HealthLevel.HEALTHY, reason="Healthy", message="probe passed", since=SINCE)
FATAL = CardHealth(
    level=HealthLevel.FATAL, reason="Xid79GpuFallenOffBus", message="fell off the bus", since=SINCE
)


@pytest.fixture
def recorder(mocker: MockerFixture) -> MockType:
    recorder: MockType = mocker.Mock(spec=EventRecorderLogger)
    return recorder


@pytest.fixture
def card() -> PhysicalGPU:
    return gpu(A30_FIRST)


@pytest.fixture
def reporter(recorder: MockType, card: PhysicalGPU) -> HealthReporter:
    return HealthReporter(recorder=recorder, gpus=lambda: [gpu(OTHER_CARD, name="node-1-1-10de-20b7"), card])


def count(reason: str, state: str) -> float:
    return float(transitions.labels(reason=reason, state=state)._value.get())


def test_a_card_turning_unhealthy_gets_a_warning_and_a_count(
    reporter: HealthReporter, recorder: MockType, card: PhysicalGPU
) -> None:
    before = count("Xid79GpuFallenOffBus", "Fatal")
    reporter.changed(A30_FIRST, HEALTHY, FATAL)
    recorder.event.assert_called_once_with(
        card,
        type_="Warning",
        reason="DeviceUnhealthy",
        message=f"{A30_FIRST} is Fatal (Xid79GpuFallenOffBus): fell off the bus",
    )
    assert count("Xid79GpuFallenOffBus", "Fatal") == before + 1


def test_a_recovered_card_gets_a_normal_event_naming_what_it_recovered_from(
    reporter: HealthReporter, recorder: MockType, card: PhysicalGPU
) -> None:
    before = count("Healthy", "Healthy")
    reporter.changed(A30_FIRST, FATAL, HEALTHY)
    recorder.event.assert_called_once_with(
        card,
        type_="Normal",
        reason="DeviceRecovered",
        message=f"{A30_FIRST} is healthy again after Xid79GpuFallenOffBus (Fatal): probe passed",
    )
    assert count("Healthy", "Healthy") == before + 1


def test_a_card_without_a_physical_gpu_is_counted_but_records_no_event(recorder: MockType) -> None:
    before = count("Xid79GpuFallenOffBus", "Fatal")
    HealthReporter(recorder=recorder, gpus=lambda: [gpu(OTHER_CARD)]).changed(A30_FIRST, HEALTHY, FATAL)
    recorder.event.assert_not_called()
    assert count("Xid79GpuFallenOffBus", "Fatal") == before + 1


def test_every_delivered_event_is_counted_without_an_event(
    reporter: HealthReporter, recorder: MockType
) -> None:
    series = events_seen.labels(reason="Xid13GraphicsEngineException", severity="Recoverable")
    before = series._value.get()
    reporter.seen(
        HealthEvent(
            address=A30_FIRST,
            reason="Xid13GraphicsEngineException",
            severity=Severity.RECOVERABLE,
            message="app fault",
        )
    )
    assert series._value.get() == before + 1
    recorder.event.assert_not_called()
