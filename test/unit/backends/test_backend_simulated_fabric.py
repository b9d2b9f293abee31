"""The simulated host's multi-node NVLink fabric: the NVL72-like trays, the file a host is put in a
fabric with, and what the real NVIDIA backend then reads and writes for its cards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testutil.unit.backends.backend_fakes import physical_gpu

from api.gpu.v1alpha1 import FabricState
from pkg.backends import BackendOptions
from pkg.backends.nvidia.fabric import fabric_facts
from pkg.backends.simulated.backend import SIMULATED_NVIDIA, SimulatedBackend
from pkg.backends.simulated.fabric import FABRIC_FILE, CardFabric, FabricFileError, read_fabric, write_fabric
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.backends.simulated.nvl72 import (
    CLIQUE_A,
    CLIQUE_B,
    NVL72_CLUSTER_UUID,
    NVL72_TRAYS,
    tray_fabric,
)
from pkg.devcluster.gpuhost import FABRIC_FILE as HOST_FABRIC_FILE
from pkg.devcluster.gpuhost import SimulatedGpuHost, nvidia_cards

ROOT = Path(__file__).resolve().parents[3]
HGX = ROOT / "test" / "fixtures" / "sysfs" / "hgx-h100"
CARDS = nvidia_cards(HGX)


def nvml(state_dir: Path) -> SimulatedNvml:
    return SimulatedNvml(node_name="tray", sysfs_root=HGX, fabric_file=state_dir / FABRIC_FILE)


def test_the_nvl72_trays_are_two_cliques_of_one_cluster_with_one_degraded_card() -> None:
    cards = [card for tray in NVL72_TRAYS.values() for card in tray]
    assert {len(tray) for tray in NVL72_TRAYS.values()} == {4}
    assert {c.cluster_uuid for c in cards} == {NVL72_CLUSTER_UUID}
    assert {c.clique_id for c in NVL72_TRAYS["tray-0"] + NVL72_TRAYS["tray-1"]} == {CLIQUE_A}
    assert {c.clique_id for c in NVL72_TRAYS["tray-2"] + NVL72_TRAYS["tray-3"]} == {CLIQUE_B}
    states = [fabric_facts(c.info()) for c in cards]
    assert [s.state for s in states if s is not None].count(FabricState.DEGRADED) == 1
    assert NVL72_TRAYS["tray-1"][3].health == ("DegradedBandwidth",)


def test_a_host_without_a_fabric_file_answers_as_a_single_board(tmp_path: Path) -> None:
    info = nvml(tmp_path).gpu_fabric_info(CARDS[0])
    facts = fabric_facts(info)
    assert facts is not None
    assert (facts.state, facts.cluster_uuid) == (FabricState.READY, None)


def test_the_simulated_nvml_answers_each_card_from_the_file_on_every_call(tmp_path: Path) -> None:
    simulated = nvml(tmp_path)
    write_fabric(tmp_path / FABRIC_FILE, tray_fabric("tray-1", CARDS))
    read = {address: fabric_facts(simulated.gpu_fabric_info(address)) for address in CARDS[:4]}
    assert {f.clique_id for f in read.values() if f} == {CLIQUE_A}
    assert [f.state for f in read.values() if f] == [FabricState.READY] * 3 + [FabricState.DEGRADED]
    assert fabric_facts(simulated.gpu_fabric_info(CARDS[4])).cluster_uuid is None  # type: ignore[union-attr]
    write_fabric(
        tmp_path / FABRIC_FILE, {CARDS[3]: CardFabric(cluster_uuid=NVL72_CLUSTER_UUID, clique_id=CLIQUE_A)}
    )
    assert fabric_facts(simulated.gpu_fabric_info(CARDS[3])).state is FabricState.READY  # type: ignore[union-attr]


def test_a_malformed_file_is_an_error_naming_the_card(tmp_path: Path) -> None:
    (tmp_path / FABRIC_FILE).write_text(
        json.dumps({CARDS[0]: {"clusterUUID": "x", "cliqueID": 1, "state": "Done"}})
    )
    with pytest.raises(FabricFileError, match=CARDS[0]):
        read_fabric(tmp_path / FABRIC_FILE)
    (tmp_path / FABRIC_FILE).write_text(
        json.dumps({CARDS[0]: {"clusterUUID": "x", "cliqueID": 1, "health": ["Hot"]}})
    )
    with pytest.raises(FabricFileError, match="Hot"):
        read_fabric(tmp_path / FABRIC_FILE)


def test_put_in_fabric_writes_what_the_simulated_nvml_reads(tmp_path: Path) -> None:
    (tmp_path / "root").symlink_to(HGX)
    host = SimulatedGpuHost(tmp_path)
    host.nvml_state.mkdir()
    assert HOST_FABRIC_FILE == FABRIC_FILE
    chosen = host.put_in_fabric(cluster_uuid=NVL72_CLUSTER_UUID, clique_id=CLIQUE_B, state="InProgress")
    assert chosen == CARDS
    host.put_in_fabric(
        cluster_uuid=NVL72_CLUSTER_UUID, clique_id=CLIQUE_B, health=["RouteUnhealthy"], addresses=CARDS[:1]
    )
    cards = read_fabric(host.nvml_state / FABRIC_FILE)
    assert cards[CARDS[0]] == CardFabric(
        cluster_uuid=NVL72_CLUSTER_UUID, clique_id=CLIQUE_B, health=("RouteUnhealthy",)
    )
    assert cards[CARDS[1]].state == "InProgress"


def test_the_backend_writes_the_fabric_block_and_heals_it_when_the_fabric_does(tmp_path: Path) -> None:
    backend = SIMULATED_NVIDIA.create(BackendOptions(node_name="tray", sysfs_root=HGX, state_dir=tmp_path))
    assert isinstance(backend, SimulatedBackend)
    gpu = physical_gpu(CARDS[0], device_id="2330")
    write_fabric(
        tmp_path / FABRIC_FILE,
        {CARDS[0]: CardFabric(cluster_uuid=NVL72_CLUSTER_UUID, clique_id=CLIQUE_A, state="NotStarted")},
    )
    fabric = backend.enrich(gpu).nvidia.fabric  # type: ignore[union-attr]
    assert fabric is not None
    assert fabric.to_api_dict() == {
        "state": "Joining",
        "clusterUUID": NVL72_CLUSTER_UUID,
        "cliqueID": CLIQUE_A,
        "reasons": ["RegistrationNotStarted"],
    }
    joined = f"{NVL72_CLUSTER_UUID}.{CLIQUE_A}"
    assert backend.offer_inputs(gpu).nvlink_domain != joined  # not joined yet: the board's switches decide
    write_fabric(
        tmp_path / FABRIC_FILE, {CARDS[0]: CardFabric(cluster_uuid=NVL72_CLUSTER_UUID, clique_id=CLIQUE_A)}
    )
    assert backend.enrich(gpu).nvidia.fabric.state is FabricState.READY  # type: ignore[union-attr]
    assert backend.offer_inputs(gpu).nvlink_domain == joined
