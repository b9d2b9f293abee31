"""The NVIDIA preparer over the simulated NVML: MIG mode, MIG devices by placement, container edits.

The simulated NVML keeps NVML's rules (what is refused, with which code) and keeps its state in a
folder shared by processes, so these tests also pin down what the e2e tier relies on when the
gpu-handler is killed and restarted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from testutil.unit.backends.backend_fakes import sysfs_card

from pkg.backends.nvidia.nvml_port import MIG_ENABLED, NvmlError, NvmlReturn
from pkg.backends.nvidia.preparer import NvidiaPreparer
from pkg.backends.preparation import MigDevice, PreparationError
from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.fake_nvml import SimulatedNvml

A30 = "0000:3b:00.0"  # device 20b7; 1g.6gb is profile 14 at starts 0-3, 2g.12gb profile 5 at 0 and 2
SECOND = "0000:86:00.0"
L4 = "0000:ca:00.0"  # device 27b8: no MIG


@pytest.fixture
def host(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    sysfs_card(root, A30, "20b7")
    sysfs_card(root, SECOND, "20b7")
    sysfs_card(root, L4, "27b8")
    return root


def nvml(host: Path, state: Path | None = None, **kwargs: object) -> SimulatedNvml:
    return SimulatedNvml(
        node_name="node-a",
        sysfs_root=host,
        state=SimulatedDriverMemory(state, **kwargs),  # type: ignore[arg-type]
    )


def _code(call: object) -> int:
    with pytest.raises(NvmlError) as caught:
        call()  # type: ignore[operator]
    return caught.value.code


# -- the simulated driver keeps NVML's rules ------------------------------------------------------


def test_gpu_instances_go_only_where_a_placement_and_free_slices_allow(host: Path) -> None:
    sim = nvml(host, mig_enabled=[A30])

    first = sim.create_gpu_instance(A30, profile_id=14, start=3, size=1)

    assert (first.profile_id, first.start, first.size) == (14, 3, 1)
    assert (
        _code(lambda: sim.create_gpu_instance(A30, profile_id=14, start=3, size=1))
        == NvmlReturn.INSUFFICIENT_RESOURCES
    )
    assert (
        _code(lambda: sim.create_gpu_instance(A30, profile_id=5, start=2, size=2))
        == NvmlReturn.INSUFFICIENT_RESOURCES
    )
    assert (
        _code(lambda: sim.create_gpu_instance(A30, profile_id=5, start=1, size=2))
        == NvmlReturn.INVALID_ARGUMENT
    )
    assert (
        _code(lambda: sim.create_gpu_instance(SECOND, profile_id=14, start=0, size=1))
        == NvmlReturn.NOT_SUPPORTED
    )
    assert sim.create_gpu_instance(A30, profile_id=5, start=0, size=2).id != first.id


def test_mig_mode_changes_only_on_an_idle_card_without_instances(host: Path) -> None:
    sim = nvml(host)
    sim.state.set_processes(A30, [4242])
    assert _code(lambda: sim.set_mig_mode(A30, MIG_ENABLED)) == NvmlReturn.IN_USE
    sim.state.set_processes(A30, [])

    sim.set_mig_mode(A30, MIG_ENABLED)
    gi = sim.create_gpu_instance(A30, profile_id=14, start=0, size=1)

    assert sim.mig_mode(A30) == (MIG_ENABLED, MIG_ENABLED)
    assert _code(lambda: sim.set_mig_mode(A30, 0)) == NvmlReturn.IN_USE
    sim.destroy_gpu_instance(A30, gi.id)
    sim.set_mig_mode(A30, 0)
    assert sim.mig_mode(A30) == (0, 0)
    assert _code(lambda: sim.set_mig_mode(L4, MIG_ENABLED)) == NvmlReturn.NOT_SUPPORTED


def test_a_gpu_instance_with_a_compute_instance_cannot_be_destroyed(host: Path) -> None:
    sim = nvml(host, mig_enabled=[A30])
    gi = sim.create_gpu_instance(A30, profile_id=14, start=0, size=1)
    ci = sim.create_compute_instance(A30, gi.id)

    assert _code(lambda: sim.destroy_gpu_instance(A30, gi.id)) == NvmlReturn.IN_USE
    assert _code(lambda: sim.create_compute_instance(A30, gi.id)) == NvmlReturn.INSUFFICIENT_RESOURCES
    sim.destroy_compute_instance(A30, gi.id, ci.id)
    sim.destroy_gpu_instance(A30, gi.id)
    assert _code(lambda: sim.destroy_gpu_instance(A30, gi.id)) == NvmlReturn.NOT_FOUND
    assert sim.gpu_instances(A30) == []


def test_the_driver_state_is_shared_by_every_process_of_the_node(host: Path, tmp_path: Path) -> None:
    state = tmp_path / "driver"
    writer = nvml(host, state)
    writer.set_mig_mode(A30, MIG_ENABLED)
    gi = writer.create_gpu_instance(A30, profile_id=14, start=2, size=1)
    ci = writer.create_compute_instance(A30, gi.id)

    reader = nvml(host, state)  # a new process: it knows nothing but the folder

    assert reader.mig_mode(A30)[0] == MIG_ENABLED
    assert [(g.id, g.start) for g in reader.gpu_instances(A30)] == [(gi.id, 2)]
    assert reader.mig_device_uuid(A30, gi.id, ci.id) == writer.mig_device_uuid(A30, gi.id, ci.id)
    assert reader.mig_device_uuid(A30, gi.id, ci.id).startswith("MIG-")


def test_minor_numbers_come_from_the_drivers_proc_file_else_probe_order(host: Path) -> None:
    sim = nvml(host)
    assert (sim.minor_number(A30), sim.minor_number(SECOND), sim.minor_number(L4)) == (0, 1, 2)

    info = host / "proc" / "driver" / "nvidia" / "gpus" / SECOND / "information"
    info.parent.mkdir(parents=True)
    info.write_text("Model: \t\t NVIDIA A30\nDevice Minor: \t 7\n")

    assert sim.minor_number(SECOND) == 7


# -- the preparer ---------------------------------------------------------------------------------


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    folder = tmp_path / "dev"
    folder.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        os.mknod(folder / name, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return folder


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    folder = tmp_path / "proc"
    (folder / "driver" / "nvidia-caps").mkdir(parents=True)
    (folder / "driver" / "nvidia-caps" / "mig-minors").write_text(
        "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
        "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n"
    )
    (folder / "devices").write_text("Character devices:\n  1 mem\n195 nvidia-frontend\n  1 nvidia-caps\n")
    return folder


def preparer(sim: SimulatedNvml, dev: Path, proc: Path) -> NvidiaPreparer:
    return NvidiaPreparer(nvml=sim, dev_root=dev, proc_root=proc)


def test_a_mig_device_is_made_at_its_placement_and_made_again_idempotently(
    host: Path, dev: Path, proc: Path
) -> None:
    sim = nvml(host, mig_enabled=[A30])
    prep = preparer(sim, dev, proc)

    device = prep.create_mig_device(A30, profile_id=14, start=3, size=1)
    again = prep.create_mig_device(A30, profile_id=14, start=3, size=1)

    assert device.complete
    assert again == device
    assert prep.mig_devices(A30) == [device]


def test_a_half_made_mig_device_is_completed_not_duplicated(host: Path, dev: Path, proc: Path) -> None:
    sim = nvml(host, mig_enabled=[A30])
    gi = sim.create_gpu_instance(A30, profile_id=14, start=1, size=1)  # an attempt that died here
    prep = preparer(sim, dev, proc)

    device = prep.create_mig_device(A30, profile_id=14, start=1, size=1)

    assert device.gpu_instance == gi.id
    assert device.complete
    assert len(sim.gpu_instances(A30)) == 1


def test_a_placement_held_by_another_profile_is_refused_by_name(host: Path, dev: Path, proc: Path) -> None:
    sim = nvml(host, mig_enabled=[A30])
    prep = preparer(sim, dev, proc)
    prep.create_mig_device(A30, profile_id=5, start=2, size=2)

    with pytest.raises(PreparationError) as caught:
        prep.create_mig_device(A30, profile_id=14, start=3, size=1)

    assert caught.value.reason == "PlacementUnavailable"
    assert A30 in str(caught.value)


def test_destroying_removes_both_instances_and_a_second_time_is_fine(
    host: Path, dev: Path, proc: Path
) -> None:
    sim = nvml(host, mig_enabled=[A30])
    prep = preparer(sim, dev, proc)
    prep.create_mig_device(A30, profile_id=14, start=0, size=1)

    assert prep.destroy_mig_device(A30, start=0) is True
    assert prep.destroy_mig_device(A30, start=0) is False
    assert sim.gpu_instances(A30) == []


def test_a_busy_card_keeps_its_mode(host: Path, dev: Path, proc: Path) -> None:
    sim = nvml(host)
    sim.state.set_processes(A30, [99])
    prep = preparer(sim, dev, proc)

    with pytest.raises(PreparationError) as caught:
        prep.set_mig_mode(A30, enabled=True)

    assert caught.value.reason == "CardBusy"
    assert prep.mig_enabled(A30) is False
    assert prep.processes(A30) == [99]


def test_a_whole_card_gets_its_node_the_control_nodes_and_its_uuid(host: Path, dev: Path, proc: Path) -> None:
    sim = nvml(host)
    edits = preparer(sim, dev, proc).card_edits(SECOND)

    assert [(n.path, n.host_path) for n in edits.device_nodes] == [
        ("/dev/nvidia1", str(dev / "nvidia1")),
        ("/dev/nvidiactl", str(dev / "nvidiactl")),
        ("/dev/nvidia-uvm", str(dev / "nvidia-uvm")),
    ]
    assert edits.env == (("NVIDIA_VISIBLE_DEVICES", sim.uuid(SECOND)),)


def test_a_mig_device_gets_its_capability_nodes_and_its_mig_uuid(host: Path, dev: Path, proc: Path) -> None:
    sim = nvml(host, mig_enabled=[A30])
    prep = preparer(sim, dev, proc)
    device = prep.create_mig_device(A30, profile_id=14, start=3, size=1)  # GPU instance 1, CI 0

    edits = prep.mig_edits(A30, device)

    paths = [n.path for n in edits.device_nodes]
    assert paths[:3] == ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    assert paths[3:] == ["/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13"]
    assert edits.env == (("NVIDIA_VISIBLE_DEVICES", device.uuid),)
    made = (dev / "nvidia-caps" / "nvidia-cap12").stat()  # made as nvidia-modprobe would
    assert stat.S_ISCHR(made.st_mode)
    assert (os.major(made.st_rdev), os.minor(made.st_rdev)) == (1, 12)


def test_a_missing_card_node_is_an_error_naming_it(host: Path, dev: Path, proc: Path) -> None:
    (dev / "nvidia1").unlink()

    with pytest.raises(PreparationError) as caught:
        preparer(nvml(host), dev, proc).card_edits(SECOND)

    assert caught.value.reason == "DeviceNodeMissing"
    assert str(dev / "nvidia1") in str(caught.value)


def test_an_incomplete_mig_device_has_no_edits(host: Path, dev: Path, proc: Path) -> None:
    half = MigDevice(profile_id=14, start=0, size=1, gpu_instance=1)

    with pytest.raises(PreparationError, match="not complete"):
        preparer(nvml(host), dev, proc).mig_edits(A30, half)
