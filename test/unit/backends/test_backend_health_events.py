"""Health events at the backend port: the XID table, NVML's event set through the real adapter (a
mocked pynvml) and through the simulated driver, and the simulated fault that a reset clears."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest
from pytest_mock import MockerFixture
from testutil.unit.backends.backend_fakes import physical_gpu

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends import BackendError, BackendOptions, VerdictStatus
from pkg.backends.health_events import HealthEvent, Severity
from pkg.backends.nvidia.events import NvmlHealthEvents, health_event, xid_severity
from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.backends.nvidia.nvml_port import (
    EVENT_DOUBLE_BIT_ECC,
    EVENT_SINGLE_BIT_ECC,
    EVENT_XID_CRITICAL,
    NvmlError,
    NvmlEvent,
    NvmlReturn,
)
from pkg.backends.simulated.backend import SIMULATED_NVIDIA
from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.events import inject_event, recover
from pkg.backends.simulated.fake_nvml import SimulatedNvml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
A, B = "0000:3b:00.0", "0000:d8:00.0"  # the two A30s of the a30-x2 host


@pytest.mark.parametrize(
    ("xid", "severity", "reason"),
    [
        (13, Severity.RECOVERABLE, "Xid13GraphicsEngineException"),
        (31, Severity.RECOVERABLE, "Xid31MemoryPageFault"),
        (94, Severity.DEGRADED, "Xid94ContainedEccError"),
        (63, Severity.DEGRADED, "Xid63RowRemappingPending"),
        (48, Severity.FATAL, "Xid48DoubleBitEccError"),
        (79, Severity.FATAL, "Xid79GpuFallenOffBus"),
        (95, Severity.FATAL, "Xid95UncontainedEccError"),
        (999, Severity.DEGRADED, "Xid999"),  # unknown: keep new work away, leave running work
    ],
)
def test_an_xid_has_a_documented_severity_and_a_reason_fit_for_a_taint_value(
    xid: int, severity: Severity, reason: str
) -> None:
    assert xid_severity(xid) == (severity, reason)
    assert len(reason) <= 63
    assert reason.isalnum()


def test_other_event_types_and_mig_instances() -> None:
    dbe = health_event(NvmlEvent(address=A, event_type=EVENT_DOUBLE_BIT_ECC, data=0, gpu_instance=3))
    assert (dbe.severity, dbe.reason, dbe.gpu_instance) == (Severity.FATAL, "DoubleBitEccError", 3)
    assert "GPU instance 3" in dbe.message
    sbe = health_event(NvmlEvent(address=A, event_type=EVENT_SINGLE_BIT_ECC, data=0))
    assert (sbe.severity, sbe.gpu_instance) == (Severity.RECOVERABLE, None)
    odd = health_event(NvmlEvent(address=A, event_type=0x40000, data=0))
    assert (odd.severity, odd.reason) == (Severity.DEGRADED, "NvmlEvent40000")


def test_the_real_adapter_registers_what_each_card_supports_and_names_the_card(mocker: MockerFixture) -> None:
    handles = {A: ctypes.c_void_p(0x1000), B: ctypes.c_void_p(0x2000)}
    for name in ("nvmlInit", "nvmlShutdown"):
        mocker.patch.object(pynvml, name)
    mocker.patch.object(pynvml, "nvmlDeviceGetHandleByPciBusId", side_effect=lambda a: handles[a])
    mocker.patch.object(pynvml, "nvmlEventSetCreate", return_value="event-set")
    supported = {0x1000: EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC, 0x2000: 0}
    mocker.patch.object(pynvml, "nvmlDeviceGetSupportedEventTypes", side_effect=lambda h: supported[h.value])
    register = mocker.patch.object(pynvml, "nvmlDeviceRegisterEvents")
    xid = SimpleNamespace(
        device=ctypes.c_void_p(0x1000), eventType=8, eventData=79, gpuInstanceId=2, computeInstanceId=0
    )
    mocker.patch.object(
        pynvml, "nvmlEventSetWait_v2", side_effect=[xid, pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)]
    )
    free = mocker.patch.object(pynvml, "nvmlEventSetFree")

    events = PynvmlAdapter().open_events([A, B], EVENT_XID_CRITICAL | EVENT_SINGLE_BIT_ECC)
    register.assert_called_once_with(handles[A], EVENT_XID_CRITICAL, "event-set")  # B supports none
    assert events.wait(100) == NvmlEvent(
        address=A, event_type=EVENT_XID_CRITICAL, data=79, gpu_instance=2, compute_instance=0
    )
    assert events.wait(100) is None  # NVML_ERROR_TIMEOUT: nothing came
    events.free()
    free.assert_called_once_with("event-set")


def test_injected_events_arrive_once_for_registered_cards_only(tmp_path: Path) -> None:
    state = SimulatedDriverMemory(tmp_path / "driver")
    inject_event(state, A, xid=48)  # before the set was opened: NVML does not replay
    nvml = SimulatedNvml(node_name="node-1", sysfs_root=FIXTURES / "a30-x2", state=state)
    source = NvmlHealthEvents(nvml, [A])
    assert source.wait(0.05) == ()
    inject_event(state, B, xid=48)  # not registered
    inject_event(SimulatedDriverMemory(tmp_path / "driver"), A, xid=79, gpu_instance=1)  # another process
    assert source.wait(1.0) == [
        HealthEvent(
            address=A,
            reason="Xid79GpuFallenOffBus",
            severity=Severity.FATAL,
            message=f"XID 79 on {A} (GPU instance 1)",
            gpu_instance=1,
        )
    ]
    assert source.wait(0.05) == ()
    source.close()


def test_a_fault_fails_the_probe_until_the_card_is_reset(tmp_path: Path) -> None:
    def a30(address: str) -> PhysicalGPU:
        return physical_gpu(address, device_id="20b7")

    backend = SIMULATED_NVIDIA.create(
        BackendOptions(node_name="node-1", sysfs_root=FIXTURES / "a30-x2", state_dir=tmp_path)
    )
    state = SimulatedDriverMemory(tmp_path / "driver")
    assert backend.health(a30(A)).status is VerdictStatus.TRUE
    inject_event(state, A, xid=13)  # the application's fault: the card stays healthy
    assert backend.health(a30(A)).status is VerdictStatus.TRUE
    inject_event(state, A, xid=94)
    verdict = backend.health(a30(A))
    assert (verdict.status, verdict.reason) == (VerdictStatus.FALSE, "RowRemappingPending")
    assert backend.health(a30(B)).status is VerdictStatus.TRUE
    recover(state, A)
    assert backend.health(a30(A)).status is VerdictStatus.TRUE


def test_a_lost_gpu_is_a_fatal_event_and_a_broken_set_is_a_backend_error() -> None:
    class Broken:
        def __init__(self, code: int, address: str | None) -> None:
            self.code, self.address = code, address

        def wait(self, timeout_ms: int) -> NvmlEvent | None:
            raise NvmlError(call="nvmlEventSetWait_v2", code=self.code, message="boom", address=self.address)

        def free(self) -> None:
            pass

    class Nvml:
        def __init__(self, code: int, address: str | None) -> None:
            self.code, self.address = code, address

        def open_events(self, addresses: object, event_types: int) -> Broken:
            return Broken(self.code, self.address)

    lost = NvmlHealthEvents(Nvml(NvmlReturn.GPU_IS_LOST, A), [A])  # type: ignore[arg-type]
    [event] = lost.wait(0.1)
    assert (event.reason, event.severity, event.address) == ("GpuLost", Severity.FATAL, A)
    broken = NvmlHealthEvents(Nvml(NvmlReturn.UNKNOWN, None), [A])  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="boom"):
        broken.wait(0.1)
