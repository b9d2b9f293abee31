"""A simulated host's reboot: volatile hardware state gone, what a disk or a card keeps kept."""

from __future__ import annotations

import os
from pathlib import Path

from pkg.backends.simulated.driver_memory import (
    CardRecord,
    ComputeInstanceRecord,
    GpuInstanceRecord,
    SimulatedDriverMemory,
)
from pkg.devcluster import hostreset
from pkg.devcluster.gpuhost import DRIVER_STATE, SimulatedGpuHost

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
A30 = FIXTURES / "a30-x2"


def _host(tmp_path: Path, fixture: Path = A30) -> SimulatedGpuHost:
    return SimulatedGpuHost.create(tmp_path / "host", fixture)


def _first_card(host: SimulatedGpuHost) -> Path:
    devices = host.root / "bus" / "pci" / "devices"
    return next(d for d in sorted(devices.iterdir()) if (d / "driver").is_symlink())


def test_each_boot_gets_a_new_id_where_the_handler_reads_it(tmp_path: Path) -> None:
    host = _host(tmp_path)
    first = hostreset.new_boot_id(host)
    second = hostreset.new_boot_id(host)

    assert first != second
    assert hostreset.read_boot_id(host) == second
    assert (host.root / "proc" / "sys" / "kernel" / "random" / "boot_id").read_text().strip() == second


def test_the_sysfs_tree_is_the_fixture_s_again_but_proc_is_kept(tmp_path: Path) -> None:
    host = _host(tmp_path)
    card = _first_card(host)
    (card / "driver").unlink()
    os.symlink("../../../bus/pci/drivers/vfio-pci", card / "driver")  # bound to vfio-pci at run time
    (card / "0b3c4a8e-0000-4000-8000-000000000001").mkdir()  # an mdev made at run time
    driver_files = host.root / "proc" / "driver" / "nvidia" / "version"
    driver_files.parent.mkdir(parents=True, exist_ok=True)
    driver_files.write_text("upgraded\n")

    hostreset.reset_sysfs(host, A30)

    assert os.readlink(card / "driver") == os.readlink(A30 / card.relative_to(host.root) / "driver")
    assert not (card / "0b3c4a8e-0000-4000-8000-000000000001").exists()
    assert driver_files.read_text() == "upgraded\n"
    assert (host.root / "etc").is_dir()


def test_device_nodes_made_at_run_time_go_and_boot_ones_stay(tmp_path: Path) -> None:
    host = _host(tmp_path)
    at_boot = host.device_nodes()
    host.make_device("vfio/77")
    host.make_device("nvidia-caps-imex-channels/channel0")

    removed = hostreset.remove_runtime_devices(host, at_boot)

    assert sorted(p.relative_to(host.dev).as_posix() for p in removed) == [
        "nvidia-caps-imex-channels/channel0",
        "vfio/77",
    ]
    assert host.device_nodes() == at_boot
    assert not (host.dev / "nvidia-caps-imex-channels").exists()


def test_the_driver_forgets_instances_and_modes_but_keeps_mig_mode(tmp_path: Path) -> None:
    host = _host(tmp_path)
    memory = SimulatedDriverMemory(host.nvml_state / DRIVER_STATE)

    def configure(card: CardRecord) -> None:
        card.mig_mode = 1
        card.gpu_instances = [
            GpuInstanceRecord(
                id=1,
                profile_id=0,
                start=0,
                size=1,
                compute_instances=[ComputeInstanceRecord(id=0, profile_id=0)],
            )
        ]
        card.processes = [4242]
        card.compute_mode = 3
        card.time_slice = 2
        card.reset_pending = True

    memory.change("0000:01:00.0", configure)
    memory.change("0000:02:00.0", lambda card: None)

    hostreset.reset_driver_state(host)

    mig = memory.card("0000:01:00.0")
    assert (mig.mig_mode, mig.gpu_instances, mig.processes) == (1, [], [])
    assert (mig.compute_mode, mig.time_slice, mig.reset_pending) == (0, 0, False)
    assert memory.card("0000:02:00.0").mig_mode == 0


def test_a_driver_that_recorded_nothing_stays_so(tmp_path: Path) -> None:
    host = _host(tmp_path)

    hostreset.reset_driver_state(host)

    assert not (host.nvml_state / DRIVER_STATE / hostreset.DRIVER_STATE_FILE).exists()


def test_power_cycle_of_a_host_without_gpus_only_changes_its_boot_id(tmp_path: Path) -> None:
    host = SimulatedGpuHost(tmp_path / "host")
    first = hostreset.new_boot_id(host)

    second = hostreset.power_cycle(host, fixture=None, boot_devices=[])

    assert second != first
    assert sorted(p.name for p in host.root.iterdir()) == ["proc"]
