"""Device health in the gpu-handler: the tracker's rules, the monitor over the simulated driver,
the taints of a verdict, the reporting, and the condition that follows the verdict."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Device, V1DeviceTaint
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu, simulated

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import CardVerdict, VendorBackend
from pkg.backends.health_events import HealthEvent, Severity
from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.events import inject_event, recover
from pkg.dra.model.limits import SliceLimitError, validate_device
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpuhandler.enrichment.handler import HealthHandler
from pkg.gpuhandler.enrichment.readiness import Readiness, readable_by
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.health import CardHealth, HealthLevel, HealthTracker
from pkg.gpuhandler.health.monitor import HealthMonitor
from pkg.gpuhandler.health.reporting import HealthReporter, transitions
from pkg.gpuhandler.health.taints import TAINT_KEY, device_taints
from pkg.gpuhandler.preparation.setup import RECORD_TYPES

T0 = datetime(2026, 11, 24, 1, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def readable(backend: VendorBackend) -> Callable[[PhysicalGPU], bool]:
    """The enrichment's readiness, as the gpu-handler gives it to the monitor."""
    return readable_by(pci_vendor_id=backend.identity.pci_vendor_id, driver_type=backend.driver_type)


def event(severity: Severity, reason: str, address: str = A30_FIRST) -> HealthEvent:
    return HealthEvent(address=address, reason=reason, severity=severity, message=f"{reason} happened")


def tracker(clock: Clock, quiet: float = 30.0) -> tuple[HealthTracker, list[tuple[str, str, str]]]:
    changes: list[tuple[str, str, str]] = []
    t = HealthTracker(quiet_period=quiet, clock=clock, now=lambda: T0)
    t.subscribe(lambda address, old, new: changes.append((address, old.level.value, new.level.value)))
    return t, changes


def state_of(t: HealthTracker) -> tuple[str, str] | None:
    v = t.verdict(A30_FIRST)
    return (v.level.value, v.reason) if v is not None else None


def test_an_episode_escalates_waits_for_quiet_and_a_passing_probe_then_ends() -> None:
    clock = Clock()
    t, changes = tracker(clock)
    t.record(event(Severity.DEGRADED, "Xid94ContainedEccError"))
    assert state_of(t) == ("Degraded", "Xid94ContainedEccError")
    t.record(event(Severity.FATAL, "Xid48DoubleBitEccError"))
    assert state_of(t) == ("Fatal", "Xid48DoubleBitEccError")
    t.record(event(Severity.DEGRADED, "Xid94ContainedEccError"))  # no downgrade while in force
    assert state_of(t) == ("Fatal", "Xid48DoubleBitEccError")
    clock.now += 29
    assert t.recovering() == []
    t.probe(A30_FIRST, CardVerdict.true("Healthy"))  # passes, but too soon after the last event
    assert state_of(t) == ("Fatal", "Xid48DoubleBitEccError")
    clock.now += 1
    assert t.recovering() == [A30_FIRST]
    t.probe(A30_FIRST, CardVerdict.false("RowRemappingPending", "needs a reset"))  # quiet, still sick
    assert state_of(t) == ("Fatal", "Xid48DoubleBitEccError")
    t.probe(A30_FIRST, CardVerdict.true("Healthy"))
    assert state_of(t) == ("Healthy", "Healthy")
    assert changes == [
        (A30_FIRST, "Healthy", "Degraded"),
        (A30_FIRST, "Degraded", "Fatal"),
        (A30_FIRST, "Fatal", "Healthy"),
    ]


def test_recoverable_events_change_nothing_but_are_seen() -> None:
    clock = Clock()
    t, changes = tracker(clock)
    seen: list[str] = []
    t.subscribe_events(lambda e: seen.append(e.reason))
    t.record(event(Severity.RECOVERABLE, "Xid13GraphicsEngineException"))
    assert changes == []
    assert seen == ["Xid13GraphicsEngineException"]
    assert t.verdict(A30_FIRST) is None or t.verdict(A30_FIRST).healthy  # type: ignore[union-attr]


def test_a_probe_fault_degrades_an_unknown_probe_does_not() -> None:
    clock = Clock()
    t, changes = tracker(clock)
    t.probe(A30_FIRST, CardVerdict.unknown("HealthCheckFailed"))
    assert state_of(t) == ("Healthy", "HealthCheckFailed")
    t.probe(A30_FIRST, CardVerdict.false("ThermalSlowdown", "hot"))
    assert state_of(t) == ("Degraded", "ThermalSlowdown")
    since = t.verdict(A30_FIRST).since  # type: ignore[union-attr]
    t.probe(A30_FIRST, CardVerdict.false("ThermalSlowdown", "still hot"))
    assert t.verdict(A30_FIRST).since == since  # type: ignore[union-attr]  # a stable timeAdded
    t.probe(A30_FIRST, CardVerdict.true("Healthy"))
    assert changes == [(A30_FIRST, "Healthy", "Degraded"), (A30_FIRST, "Degraded", "Healthy")]


def test_taints_follow_the_verdict_and_pass_the_api_rules() -> None:
    since = T0
    healthy = CardHealth(level=HealthLevel.HEALTHY, reason="Healthy", message="", since=since)
    degraded = CardHealth(
        level=HealthLevel.DEGRADED, reason="Xid94ContainedEccError", message="", since=since
    )
    fatal = CardHealth(level=HealthLevel.FATAL, reason="Xid79GpuFallenOffBus", message="", since=since)
    assert device_taints(None) == device_taints(healthy) == []
    assert device_taints(degraded) == [
        V1DeviceTaint(key=TAINT_KEY, value="Xid94ContainedEccError", effect="NoSchedule", time_added=since)
    ]
    [taint] = device_taints(fatal)
    assert (taint.key, taint.effect) == ("gpu.deckhouse.io/unhealthy", "NoExecute")
    validate_device(V1Device(name="gpu-0000-3b-00-0", taints=device_taints(fatal)))


@pytest.mark.parametrize(
    ("taint", "message"),
    [
        (V1DeviceTaint(key="bad key/x", value="v", effect="NoSchedule"), "taint key"),
        (
            V1DeviceTaint(key="gpu.deckhouse.io/unhealthy", value="has space", effect="NoSchedule"),
            "taint value",
        ),
        (V1DeviceTaint(key="gpu.deckhouse.io/unhealthy", value="x" * 64, effect="NoSchedule"), "taint value"),
        (
            V1DeviceTaint(key="gpu.deckhouse.io/unhealthy", value="v", effect="PreferNoSchedule"),
            "taint effect",
        ),
    ],
)
def test_a_taint_the_api_server_would_reject_is_caught_before_writing(
    taint: V1DeviceTaint, message: str
) -> None:
    with pytest.raises(SliceLimitError, match=message):
        validate_device(V1Device(name="gpu-0000-3b-00-0", taints=[taint]))
    with pytest.raises(SliceLimitError, match="17 taints"):
        validate_device(V1Device(name="gpu-0000-3b-00-0", taints=[device_taints_one()] * 17))


def device_taints_one() -> V1DeviceTaint:
    return V1DeviceTaint(key=TAINT_KEY, value="X", effect="NoSchedule")


def test_the_monitor_turns_injected_events_into_verdicts_and_recovers_the_reset_card(tmp_path: Path) -> None:
    backend = simulated(state_dir=tmp_path)
    driver = SimulatedDriverMemory(tmp_path / "driver")
    t = HealthTracker(quiet_period=0.0)
    card = gpu(A30_FIRST)
    monitor = HealthMonitor(
        backend=backend, tracker=t, gpus=lambda: [card], readable=readable(backend), poll=0.05
    )
    stop = threading.Event()
    monitor.step(stop)  # opens the event set: what comes after is seen
    inject_event(driver, A30_FIRST, xid=48)
    for _ in range(20):
        monitor.step(stop)
        if t.verdict(A30_FIRST) is not None:
            break
    assert state_of(t) == ("Fatal", "Xid48DoubleBitEccError")
    monitor.step(stop)  # quiet period 0: probed, but the card still needs its reset
    assert state_of(t) == ("Fatal", "Xid48DoubleBitEccError")
    recover(driver, A30_FIRST)
    monitor.step(stop)
    assert state_of(t) == ("Healthy", "Healthy")


def test_hardware_healthy_carries_the_event_while_the_episode_lasts() -> None:
    backend = simulated()
    t = HealthTracker(quiet_period=60.0)
    handler = HealthHandler(backend=backend, tracker=t, now=lambda: T0)
    state = EnrichmentState(gpu=gpu(A30_FIRST))
    state.readiness = Readiness.READY
    handler.handle(state)
    assert state.health is not None
    assert (state.health.status, state.health.reason) == ("True", "Healthy")
    t.record(event(Severity.FATAL, "Xid79GpuFallenOffBus"))
    handler.handle(state)
    assert (state.health.status, state.health.reason) == ("False", "Xid79GpuFallenOffBus")


def test_reporting_records_one_event_per_transition_and_counts_it(mocker: MockerFixture) -> None:
    recorder = mocker.MagicMock(spec=EventRecorderLogger)
    card = gpu(A30_FIRST)
    reporter = HealthReporter(recorder=recorder, gpus=lambda: [card])
    t = HealthTracker(quiet_period=0.0, now=lambda: T0)
    t.subscribe(reporter.changed)
    before = transitions.labels(reason="Xid48DoubleBitEccError", state="Fatal")._value.get()
    t.record(event(Severity.FATAL, "Xid48DoubleBitEccError"))
    t.record(event(Severity.FATAL, "Xid48DoubleBitEccError"))  # no transition: no second event
    t.probe(A30_FIRST, CardVerdict.true("Healthy"))
    calls: list[Any] = recorder.event.call_args_list
    assert [(c.kwargs["type_"], c.kwargs["reason"]) for c in calls] == [
        ("Warning", "DeviceUnhealthy"),
        ("Normal", "DeviceRecovered"),
    ]
    assert calls[0].args[0] is card
    assert transitions.labels(reason="Xid48DoubleBitEccError", state="Fatal")._value.get() == before + 1


def test_the_kubelet_stream_reports_prepared_devices_by_the_verdict_at_once(tmp_path: Path) -> None:
    from pkg.framework.kubeletplugin.types import HealthBoard, HealthStatus
    from pkg.gpuhandler.preparation.checkpoint import (
        CheckpointData,
        CheckpointStore,
        ClaimRecord,
        DeviceRecord,
        PreparePhase,
    )
    from pkg.gpuhandler.preparation.health_feed import HealthFeed

    store = CheckpointStore(tmp_path / "checkpoint.json", boot_id=lambda: "boot", records=RECORD_TYPES)
    device = DeviceRecord.model_validate(
        {"pool": "gpus/node-1", "device": "gpu-0000-3b-00-0-mig-14-3", "card": A30_FIRST, "deviceType": "MIG"}
    )
    claim = ClaimRecord(
        uid="5b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3",
        namespace="ns",
        name="c",
        state=PreparePhase.PREPARE_COMPLETED,
        devices=[device],
    )
    store.save(
        CheckpointData.model_validate(
            {
                "bootID": "boot",
                "claims": {"5b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3": claim.model_dump(by_alias=True)},
            }
        )
    )
    board = HealthBoard()
    t = HealthTracker(quiet_period=0.0, now=lambda: T0)
    feed = HealthFeed(board=board, store=store, gpus=lambda: [gpu(A30_FIRST)], verdicts=t.verdicts)
    t.subscribe(lambda _a, _o, _n: feed.refresh())  # as the plugin wires it
    feed.refresh()
    [reported] = board.current()
    assert reported.status is HealthStatus.UNKNOWN  # neither a verdict nor a condition yet
    t.record(event(Severity.FATAL, "Xid48DoubleBitEccError"))
    [reported] = board.current()
    assert (reported.pool, reported.device) == ("gpus/node-1", "gpu-0000-3b-00-0-mig-14-3")
    assert reported.status is HealthStatus.UNHEALTHY
    assert reported.message.startswith("Xid48DoubleBitEccError: ")
    t.probe(A30_FIRST, CardVerdict.true("Healthy"))
    assert board.current()[0].status is HealthStatus.HEALTHY


def test_the_monitor_leaves_out_cards_its_library_cannot_see(tmp_path: Path) -> None:
    from api.gpu.v1alpha1 import DriverType

    second = "0000:d8:00.0"
    backend = simulated(state_dir=tmp_path)
    driver = SimulatedDriverMemory(tmp_path / "driver")
    t = HealthTracker(quiet_period=60.0)
    cards = [gpu(A30_FIRST, driver_type=DriverType.VFIO), gpu(second, name="node-1-1-10de-20b7")]
    monitor = HealthMonitor(
        backend=backend, tracker=t, gpus=lambda: cards, readable=readable(backend), poll=0.05
    )
    stop = threading.Event()
    monitor.step(stop)
    inject_event(driver, A30_FIRST, xid=79)
    inject_event(driver, second, xid=79)
    for _ in range(20):
        monitor.step(stop)
    assert t.verdict(A30_FIRST) is None  # bound to vfio-pci: not in the event set
    assert t.verdict(second) is not None
    assert t.verdict(second).level is HealthLevel.FATAL  # type: ignore[union-attr]
