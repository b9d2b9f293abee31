"""The simulated host's faults as the simulated NVML sees them: a card off the bus and a driver
upgrade, written by the dev cluster (which may not import the backend) in the backend's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.backends.nvidia.nvml_port import EVENT_XID_CRITICAL, NO_INSTANCE, NvmlError, NvmlReturn
from pkg.backends.simulated import driver_memory, host_changes
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.devcluster import gpuhost
from pkg.devcluster.gpuhost import SimulatedGpuHost, nvidia_cards

ROOT = Path(__file__).resolve().parents[3]
A30 = ROOT / "test" / "fixtures" / "sysfs" / "a30-x2"
CARDS = nvidia_cards(A30)


def _nvml(host: SimulatedGpuHost) -> SimulatedNvml:
    """The simulated NVML as gpu-handler builds it over the host's state folder."""
    state = host.nvml_state
    return SimulatedNvml(
        node_name="node",
        sysfs_root=A30,
        state=SimulatedDriverMemory(state / "driver"),
        lost_file=state / host_changes.LOST_CARDS_FILE,
        driver_version_file=state / host_changes.DRIVER_VERSION_FILE,
    )


def test_the_dev_cluster_writes_the_files_the_simulated_driver_reads() -> None:
    assert gpuhost.LOST_CARDS_FILE == host_changes.LOST_CARDS_FILE
    assert gpuhost.DRIVER_VERSION_FILE == host_changes.DRIVER_VERSION_FILE
    assert (gpuhost.EVENTS_FILE, gpuhost.EVENTS_LOCK) == (driver_memory.EVENTS_FILE, driver_memory.LOCK_FILE)
    assert (gpuhost.EVENT_XID_CRITICAL, gpuhost.NO_INSTANCE) == (EVENT_XID_CRITICAL, NO_INSTANCE)


def test_an_unplugged_card_is_lost_to_every_query_and_the_other_card_is_not(tmp_path: Path) -> None:
    host = SimulatedGpuHost(tmp_path)
    nvml = _nvml(host)
    lost, kept = CARDS
    host.unplug_card(lost)
    for query in (nvml.name, nvml.uuid, nvml.memory_total_bytes, nvml.mig_mode):
        with pytest.raises(NvmlError) as caught:
            query(lost)
        assert caught.value.code is NvmlReturn.GPU_IS_LOST
        assert caught.value.address == lost
    assert nvml.name(kept)
    assert host.lost_cards() == {lost}


def test_an_unplugged_card_reports_xid_79_to_an_open_event_set(tmp_path: Path) -> None:
    host = SimulatedGpuHost(tmp_path)
    events = _nvml(host).open_events(CARDS, EVENT_XID_CRITICAL)
    host.unplug_card(CARDS[0])
    event = events.wait(1000)
    assert event is not None
    assert (event.address, event.event_type, event.data) == (CARDS[0], EVENT_XID_CRITICAL, 79)


def test_a_replugged_card_answers_again(tmp_path: Path) -> None:
    host = SimulatedGpuHost(tmp_path)
    nvml = _nvml(host)
    before = nvml.uuid(CARDS[0])
    host.unplug_card(CARDS[0])
    host.unplug_card(CARDS[1])
    host.replug_card(CARDS[0])
    assert nvml.uuid(CARDS[0]) == before
    assert host.lost_cards() == {CARDS[1]}
    with pytest.raises(NvmlError):
        nvml.uuid(CARDS[1])


def test_nvml_reports_the_loaded_driver_version_from_the_next_call_on(tmp_path: Path) -> None:
    host = SimulatedGpuHost(tmp_path)
    nvml = _nvml(host)
    assert nvml.driver_version() == DRIVER_VERSION
    host.load_driver("590.10.01")
    assert nvml.driver_version() == "590.10.01"
