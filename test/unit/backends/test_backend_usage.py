"""The usage read: the simulated NVML lists the real processes that hold its cards' nodes open,
and the NVIDIA backend turns NVML's process list, utilization samples and energy counter into one
card's :class:`~pkg.backends.usage.CardUsage` — with MIG processes named by their MIG device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from testutil.unit.backends.backend_fakes import sysfs_card

from pkg.backends.backend import BackendError
from pkg.backends.nvidia.nvml_port import MIG_ENABLED, NvmlError, NvmlReturn
from pkg.backends.nvidia.usage import UsageReader
from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.backends.simulated.gpu_processes import GpuProcessScan

A30 = "0000:3b:00.0"  # device 20b7, minor 0 in probe order
SECOND = "0000:86:00.0"  # minor 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def host(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    sysfs_card(root, A30, "20b7")
    sysfs_card(root, SECOND, "20b7")
    return root


def process(proc: Path, pid: int, *, env: dict[str, str], nodes: list[str]) -> None:
    """A process as /proc shows it: its environment and its open files (links to device paths)."""
    folder = proc / str(pid)
    (folder / "fd").mkdir(parents=True)
    (folder / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    for fd, node in enumerate(nodes, start=3):
        os.symlink(node, folder / "fd" / str(fd))


def simulated(host: Path, proc: Path, clock: Clock | None = None, **state: object) -> SimulatedNvml:
    return SimulatedNvml(
        node_name="node-a",
        sysfs_root=host,
        state=SimulatedDriverMemory(None, **state),  # type: ignore[arg-type]
        processes_proc=proc,
        clock=clock or Clock(),
    )


def test_a_process_holding_the_cards_node_and_naming_its_uuid_is_on_the_card(
    host: Path, tmp_path: Path
) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    nvml = simulated(host, proc)
    card_uuid = nvml.uuid(A30)
    env = {
        "NVIDIA_VISIBLE_DEVICES": card_uuid,
        "SIMULATED_GPU_MEMORY_MIB": "512",
        "SIMULATED_GPU_SM_PERCENT": "40",
    }
    process(proc, 11, env=env, nodes=["/dev/nvidia0", "/dev/null"])
    process(proc, 12, env=env, nodes=["/dev/null"])  # the card named but not opened: not on it
    process(proc, 13, env={"NVIDIA_VISIBLE_DEVICES": "GPU-of-another-node"}, nodes=["/dev/nvidia0"])
    process(proc, 14, env={"PATH": "/bin"}, nodes=["/dev/nvidia0"])  # no card named at all

    [found] = nvml.processes(A30)

    assert (found.pid, found.used_memory_bytes) == (11, 512 << 20)
    assert nvml.processes(SECOND) == []
    assert nvml.running_processes(A30) == [11]
    [sample] = nvml.process_utilization(A30, 0)
    assert (sample.pid, sample.sm_percent) == (11, 40)
    with pytest.raises(NvmlError) as refused:  # a busy card keeps its MIG mode, as NVML says
        nvml.set_mig_mode(A30, MIG_ENABLED)
    assert refused.value.code == NvmlReturn.IN_USE


def test_a_process_in_a_mig_device_is_reported_with_its_instances(host: Path, tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    nvml = simulated(host, proc, mig_enabled=[A30])
    gi = nvml.create_gpu_instance(A30, profile_id=14, start=0, size=1)
    ci = nvml.create_compute_instance(A30, gi.id)
    mig = nvml.mig_device_uuid(A30, gi.id, ci.id)
    process(
        proc,
        21,
        env={"NVIDIA_VISIBLE_DEVICES": mig, "SIMULATED_GPU_MEMORY_MIB": "100"},
        nodes=["/dev/nvidia0"],
    )

    [found] = nvml.processes(A30)
    usage = UsageReader(nvml).read(A30)

    assert (found.gpu_instance, found.compute_instance) == (gi.id, ci.id)
    [reported] = usage.processes
    assert reported.device_uuid == mig
    assert reported.memory_bytes == 100 << 20
    assert reported.sm_percent is None  # NVML samples no process utilization in MIG mode


def test_the_energy_counter_advances_with_the_power_drawn(host: Path, tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    clock = Clock()
    nvml = simulated(host, proc, clock)
    first = nvml.total_energy_mj(A30)
    clock.now += 10
    idle = nvml.total_energy_mj(A30) - first
    process(
        proc,
        31,
        env={"NVIDIA_VISIBLE_DEVICES": nvml.uuid(A30), "SIMULATED_GPU_SM_PERCENT": "100"},
        nodes=["/dev/nvidia0"],
    )
    nvml = simulated(host, proc, clock)  # a fresh scan
    start = nvml.total_energy_mj(A30)
    clock.now += 10
    busy = nvml.total_energy_mj(A30) - start

    assert idle > 0
    assert busy == pytest.approx(4 * idle, rel=0.01)  # idle draws a quarter of the maximum


def test_utilization_samples_are_read_once_and_averaged_per_pid() -> None:
    from pkg.backends.nvidia.nvml_port import ProcessInfo, ProcessUtilization

    class Nvml:
        def __init__(self) -> None:
            self.asked_since: list[int] = []

        def uuid(self, address: str) -> str:
            return "GPU-1"

        def processes(self, address: str) -> list[ProcessInfo]:
            return [ProcessInfo(pid=1, used_memory_bytes=None), ProcessInfo(pid=2, used_memory_bytes=7)]

        def process_utilization(self, address: str, since_us: int) -> list[ProcessUtilization]:
            self.asked_since.append(since_us)
            return [
                ProcessUtilization(pid=1, timestamp_us=since_us + 10, sm_percent=30, memory_percent=0),
                ProcessUtilization(pid=1, timestamp_us=since_us + 20, sm_percent=50, memory_percent=0),
            ]

        def total_energy_mj(self, address: str) -> int:
            raise NvmlError(
                call="nvmlDeviceGetTotalEnergyConsumption", code=NvmlReturn.NOT_SUPPORTED, message=""
            )

    fake = Nvml()
    reader = UsageReader(fake)  # type: ignore[arg-type]

    first = reader.read(A30)
    reader.read(A30)

    assert fake.asked_since == [0, 20]
    assert {p.pid: (p.memory_bytes, p.sm_percent) for p in first.processes} == {1: (None, 40), 2: (7, 0)}
    assert first.energy_mj is None


def test_a_card_nvml_cannot_read_is_a_backend_error(host: Path, tmp_path: Path) -> None:
    nvml = simulated(host, tmp_path)

    with pytest.raises(BackendError) as failed:
        UsageReader(nvml).read("0000:99:00.0")
    assert failed.value.address == "0000:99:00.0"
    assert failed.value.reason == "NvmlNotFound"


def test_the_scan_reads_proc_once_per_period(tmp_path: Path) -> None:
    clock = Clock()
    scan = GpuProcessScan(tmp_path, clock=clock)
    assert scan.processes() == ()
    process(tmp_path, 41, env={"NVIDIA_VISIBLE_DEVICES": "GPU-x"}, nodes=["/dev/nvidia3"])

    assert scan.processes() == ()  # the last scan still serves
    clock.now += 1.0
    [found] = scan.processes()
    assert (found.pid, found.minors, found.visible) == (41, frozenset({3}), frozenset({"GPU-x"}))
