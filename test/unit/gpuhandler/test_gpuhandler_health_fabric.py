"""Fabric faults in the gpu-handler: a card of a multi-node NVLink fabric that is not Ready gets a
NoSchedule device taint under its own key, stable while the fault lasts, lifted when it heals;
the enrichment's fabric step feeds it from the card's status block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes.client import V1Device
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu

from api.gpu.v1alpha1 import FabricState, NvidiaFabric, NvidiaState
from pkg.backends.backend import BackendError, Enrichment
from pkg.dra.model.limits import validate_device
from pkg.gpuhandler.enrichment.handler import FabricHandler
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.health import CardHealth, HealthLevel, HealthTracker
from pkg.gpuhandler.health.fabric import FABRIC_DEGRADED_KEY, FABRIC_NOT_READY_KEY, FabricFaults
from pkg.gpuhandler.health.taints import TAINT_KEY, device_taints

T0 = datetime(2026, 11, 24, 1, 0, 0, tzinfo=UTC)


class Now:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def now() -> Now:
    return Now()


@pytest.fixture
def faults(now: Now) -> FabricFaults:
    return FabricFaults(now=now)


def taints(faults: FabricFaults, address: str = A30_FIRST) -> list[tuple[str, str | None, str]]:
    return [(t.key, t.value, t.effect) for t in device_taints(None, faults.fault(address))]


@pytest.mark.parametrize(
    ("state", "reasons", "expected"),
    [
        (FabricState.JOINING, ["RegistrationNotStarted"], (FABRIC_NOT_READY_KEY, "RegistrationNotStarted")),
        (FabricState.JOINING, ["RegistrationInProgress"], (FABRIC_NOT_READY_KEY, "RegistrationInProgress")),
        (
            FabricState.FAILED,
            ["RegistrationFailedTimeout"],
            (FABRIC_NOT_READY_KEY, "RegistrationFailedTimeout"),
        ),
        (
            FabricState.DEGRADED,
            ["DegradedBandwidth", "RouteUnhealthy"],
            (FABRIC_DEGRADED_KEY, "DegradedBandwidth.RouteUnhealthy"),
        ),
    ],
)
def test_a_fabric_not_ready_taints_noschedule_with_its_reason(
    faults: FabricFaults, state: FabricState, reasons: list[str], expected: tuple[str, str]
) -> None:
    faults.observe(A30_FIRST, state, reasons)
    assert taints(faults) == [(*expected, "NoSchedule")]
    validate_device(V1Device(name="gpu-0000-3b-00-0", taints=device_taints(None, faults.fault(A30_FIRST))))


@pytest.mark.parametrize("state", [FabricState.READY, None])
def test_a_ready_fabric_or_none_taints_nothing(faults: FabricFaults, state: FabricState | None) -> None:
    faults.observe(A30_FIRST, state)
    assert taints(faults) == []


def test_the_taint_keeps_its_time_while_the_fault_lasts_and_goes_when_it_heals(
    faults: FabricFaults, now: Now
) -> None:
    told: list[str] = []
    faults.subscribe(told.append)
    faults.observe(A30_FIRST, FabricState.DEGRADED, ["RouteRecovery"])
    now.at = T0 + timedelta(minutes=5)
    faults.observe(A30_FIRST, FabricState.DEGRADED, ["RouteRecovery"])  # the next pass: no change
    [taint] = device_taints(None, faults.fault(A30_FIRST))
    assert taint.time_added == T0
    assert told == [A30_FIRST]
    faults.observe(A30_FIRST, FabricState.DEGRADED, ["RouteUnhealthy"])  # another fault: a new taint
    [taint] = device_taints(None, faults.fault(A30_FIRST))
    assert (taint.value, taint.time_added) == ("RouteUnhealthy", T0 + timedelta(minutes=5))
    faults.observe(A30_FIRST, FabricState.READY)
    assert taints(faults) == []
    assert told == [A30_FIRST] * 3


def test_a_long_reason_list_is_cut_to_a_label_value(faults: FabricFaults) -> None:
    faults.observe(
        A30_FIRST, FabricState.DEGRADED, ["DegradedBandwidth", "RouteRecovery", "RouteUnhealthy", "X" * 40]
    )
    [taint] = device_taints(None, faults.fault(A30_FIRST))
    assert taint.value is not None
    assert len(taint.value) <= 63
    assert not taint.value.endswith(".")


def test_a_fabric_fault_and_a_health_verdict_are_two_taints(faults: FabricFaults) -> None:
    faults.observe(A30_FIRST, FabricState.JOINING, ["RegistrationInProgress"])
    fatal = CardHealth(level=HealthLevel.FATAL, reason="Xid79GpuFallenOffBus", message="", since=T0)
    assert [(t.key, t.effect) for t in device_taints(fatal, faults.fault(A30_FIRST))] == [
        (TAINT_KEY, "NoExecute"),
        (FABRIC_NOT_READY_KEY, "NoSchedule"),
    ]


def fabric_state(fabric: NvidiaFabric | None, *, readiness: Readiness = Readiness.READY) -> EnrichmentState:
    state = EnrichmentState(gpu=gpu(), readiness=readiness)
    state.enrichment = Enrichment(capabilities=None, nvidia=NvidiaState(fabric=fabric))
    return state


def test_the_enrichment_step_feeds_the_trackers_fabric_faults() -> None:
    tracker = HealthTracker(quiet_period=0)
    step = FabricHandler(faults=tracker.fabric)
    step.handle(fabric_state(NvidiaFabric(state=FabricState.FAILED, reasons=["RegistrationFailedTimeout"])))
    fault = tracker.fabric.fault(A30_FIRST)
    assert fault is not None
    assert (fault.key, fault.value) == (FABRIC_NOT_READY_KEY, "RegistrationFailedTimeout")
    step.handle(fabric_state(None))  # the card left the fabric
    assert tracker.fabric.fault(A30_FIRST) is None


def test_a_card_not_read_in_this_pass_keeps_its_fault() -> None:
    faults = FabricFaults()
    faults.observe(A30_FIRST, FabricState.DEGRADED, ["DegradedBandwidth"])
    step = FabricHandler(faults=faults)
    failed = fabric_state(None)
    failed.failures.append(BackendError(address=A30_FIRST, reason="NvmlTimeout", message="timeout"))
    step.handle(failed)
    step.handle(fabric_state(None, readiness=Readiness.NOT_READY))
    assert faults.fault(A30_FIRST) is not None
