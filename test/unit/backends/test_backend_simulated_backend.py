"""The simulated backend: the real NVIDIA backend over the simulated NVML, for every model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from testutil.unit.backends.backend_fakes import physical_gpu, sysfs_card

from pkg.backends import BackendError, BackendOptions, VerdictStatus
from pkg.backends.nvidia.architecture import architecture_name
from pkg.backends.simulated.backend import SIMULATED_NVIDIA, SimulatedBackend, read_health_file
from pkg.backends.simulated.data import SimulatedModel, models
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.backends.simulated.pci_kernel import SimulatedPciKernel
from pkg.hardware.mdev import MdevHost, new_mdev_uuid

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "test" / "fixtures" / "sysfs"
ADDRESS = "0000:3b:00.0"
EXPECTED_MODELS = {
    "20b7": "NVIDIA A30",
    "20b0": "NVIDIA A100-SXM4-40GB",
    "20b2": "NVIDIA A100-SXM4-80GB",
    "20b5": "NVIDIA A100 80GB PCIe",
    "2330": "NVIDIA H100 80GB HBM3",
    "2335": "NVIDIA H200",
    "2901": "NVIDIA B200",
    "27b8": "NVIDIA L4",
    "1eb8": "Tesla T4",
    "2230": "NVIDIA RTX A6000",
}


def simulated(root: Path, *, node: str = "node-1", state_dir: Path | None = None) -> SimulatedBackend:
    backend = SIMULATED_NVIDIA.create(BackendOptions(node_name=node, sysfs_root=root, state_dir=state_dir))
    assert isinstance(backend, SimulatedBackend)
    return backend


def test_the_simulation_knows_every_model_of_the_data_and_the_fixtures() -> None:
    assert {d: m.product_name for d, m in models().items()} == EXPECTED_MODELS


@pytest.mark.parametrize("model", models().values(), ids=lambda m: m.product_name)
def test_every_model_enriches_as_its_data_says(tmp_path: Path, model: SimulatedModel) -> None:
    sysfs_card(tmp_path, ADDRESS, model.pci_device_id)
    gpu = physical_gpu(ADDRESS, device_id=model.pci_device_id)
    backend = simulated(tmp_path)
    enrichment = backend.enrich(gpu)
    caps, state = enrichment.capabilities, enrichment.nvidia
    assert caps is not None
    assert caps.nvidia is not None
    assert state is not None
    assert (caps.product_name, caps.memory_mib) == (model.product_name, model.memory_mib)
    assert caps.nvidia.compute_cap == "{}.{}".format(*model.compute_capability)
    assert caps.nvidia.product_architecture == architecture_name(model.architecture)
    assert caps.nvidia.compute_types
    assert caps.nvidia.board_part_number is None  # not in the data: NVML says NOT_SUPPORTED
    limits = (caps.nvidia.power_limit_min_w, caps.nvidia.power_limit_max_w)
    assert limits == (model.power_limits_w or (None, None))
    assert (
        state.power_limit_current_w == state.power_limit_enforced_w == (model.power_limits_w or (0, None))[1]
    )
    assert (state.driver_version, state.cuda_version) == ("580.76.05", "13.0")
    assert caps.nvidia.mig_supported is (model.mig is not None)
    if model.mig is None:
        assert caps.nvidia.mig is None
        assert state.mig is None
    else:
        assert caps.nvidia.mig is not None
        assert state.mig is not None
        assert state.mig.mode == "Disabled"
        assert caps.nvidia.mig.total_slices == model.mig.compute_slices
        assert {(p.profile_id, p.name, p.memory_mib) for p in caps.nvidia.mig.profiles} == {
            (p.info.id, p.info.name, p.info.memory_mib) for p in model.mig.profiles
        }
        card = backend.offer_inputs(gpu)
        assert card.memory_slices == model.mig.memory_slices
    assert backend.health(gpu).status is VerdictStatus.TRUE


@pytest.mark.parametrize(
    ("scenario", "address", "device_id", "product"),
    [
        ("a30-x2", "0000:d8:00.0", "20b7", "NVIDIA A30"),
        ("a100-80gb", "0000:ca:00.0", "20b2", "NVIDIA A100-SXM4-80GB"),
        ("h100-sxm", "0000:18:00.0", "2330", "NVIDIA H100 80GB HBM3"),
        ("h100-and-l4", "0000:ce:00.0", "27b8", "NVIDIA L4"),
        ("rtx-workstation", "0000:65:00.0", "2230", "NVIDIA RTX A6000"),
    ],
)
def test_fixture_hosts(scenario: str, address: str, device_id: str, product: str) -> None:
    caps = simulated(FIXTURES / scenario).enrich(physical_gpu(address, device_id=device_id)).capabilities
    assert caps is not None
    assert caps.product_name == product


def test_a_card_not_bound_to_nvidia_is_invisible_like_to_real_nvml() -> None:
    backend = simulated(FIXTURES / "l4")  # 0000:ca:00.0 is bound to vfio-pci
    with pytest.raises(BackendError) as caught:
        backend.enrich(physical_gpu("0000:ca:00.0", device_id="27b8"))
    assert caught.value.reason == "NvmlNotFound"
    assert backend.enrich(physical_gpu("0000:4a:00.0", device_id="27b8")).capabilities is not None


def test_uuids_are_stable_per_node_and_address(tmp_path: Path) -> None:
    sysfs_card(tmp_path, ADDRESS, "20b7")
    sysfs_card(tmp_path, "0000:d8:00.0", "20b7")

    def uuid(node: str, address: str) -> str | None:
        state = simulated(tmp_path, node=node).enrich(physical_gpu(address, device_id="20b7")).nvidia
        return state.gpu_uuid if state else None

    first = uuid("node-1", ADDRESS)
    assert first is not None
    assert first.startswith("GPU-")
    assert len(first) == 40
    assert uuid("node-1", ADDRESS) == first
    assert uuid("node-2", ADDRESS) != first
    assert uuid("node-1", "0000:d8:00.0") != first


def test_an_old_driver_makes_the_backend_use_its_tables(tmp_path: Path) -> None:
    sysfs_card(tmp_path, ADDRESS, "2330")
    nvml = SimulatedNvml(node_name="n", sysfs_root=tmp_path, driver_version="535.183.01")
    with pytest.raises(Exception, match="Not Supported"):
        nvml.gpu_instance_profile_info(ADDRESS, 0)
    caps = SimulatedBackend(nvml=nvml).enrich(physical_gpu(ADDRESS, device_id="2330")).capabilities
    assert caps is not None
    assert caps.nvidia is not None
    assert caps.nvidia.mig is not None
    assert len(caps.nvidia.mig.profiles) == 7
    enabled = SimulatedNvml(node_name="n", sysfs_root=tmp_path, driver_version="535.1", mig_enabled=[ADDRESS])
    assert enabled.gpu_instance_profile_info(ADDRESS, 0).name == "1g.10gb"


def test_a_health_file_overrides_the_verdict_until_it_is_removed(tmp_path: Path) -> None:
    sysfs_card(tmp_path, ADDRESS, "20b7")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    backend = simulated(tmp_path, state_dir=state_dir)
    gpu = physical_gpu(ADDRESS, device_id="20b7")
    health_file = state_dir / f"{ADDRESS}.health"
    health_file.write_text("False RowRemappingFailed row remapping failed on bank 3\n")
    report = backend.health(gpu)
    assert (report.status, report.reason, report.message) == (
        VerdictStatus.FALSE,
        "RowRemappingFailed",
        "row remapping failed on bank 3",
    )
    health_file.unlink()
    assert backend.health(gpu).status is VerdictStatus.TRUE


@pytest.mark.parametrize("content", ["", "Sick", "Maybe Reason text", "False not-a-reason text", "True"])
def test_a_malformed_health_file_is_never_read_as_healthy(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.health"
    path.write_text(content)
    report = read_health_file(path)
    assert report is not None
    assert (report.status, report.reason) == (VerdictStatus.UNKNOWN, "InvalidHealthFile")
    assert read_health_file(tmp_path / "missing.health") is None


def test_a_card_in_vgpu_mode_is_offered_as_its_mdev_types() -> None:
    backend = simulated(FIXTURES / "t4-vgpu")
    card = backend.offer_inputs(physical_gpu(ADDRESS, device_id="1eb8"))
    assert card.product_name == "Tesla T4"
    assert [(t.type_id, t.name, t.framebuffer_mib, t.max_instances) for t in card.vgpu_types] == [
        ("nvidia-232", "GRID T4-4Q", 4096, 4),
        ("nvidia-233", "GRID T4-8Q", 8192, 2),
        ("nvidia-234", "GRID T4-16Q", 16384, 1),
        ("nvidia-319", "GRID T4-4C", 4096, 4),
    ]
    plain = simulated(FIXTURES / "a30-x2").offer_inputs(physical_gpu(ADDRESS, device_id="20b7"))
    assert plain.vgpu_types == ()


def test_only_the_types_a_card_can_take_or_holds_are_offered(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "t4-vgpu", tmp_path / "sys", symlinks=True)
    root = tmp_path / "sys"
    kernel = SimulatedPciKernel(sysfs_root=root, dev_root=tmp_path / "dev")
    mdevs = MdevHost(root, kernel=kernel)
    uuids = [new_mdev_uuid() for _ in range(4)]
    for uuid in uuids:  # the card fills up with one type: the others cannot join it
        mdevs.create(ADDRESS, "nvidia-232", uuid)

    def offered() -> list[str]:
        card = simulated(root).offer_inputs(physical_gpu(ADDRESS, device_id="1eb8"))
        return [t.type_id for t in card.vgpu_types]

    assert offered() == ["nvidia-232"]  # full, but its offers stay under their claims
    for uuid in uuids:
        mdevs.remove(uuid)
    assert offered() == ["nvidia-232", "nvidia-233", "nvidia-234", "nvidia-319"]
