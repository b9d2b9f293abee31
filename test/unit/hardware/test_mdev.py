"""vGPU mediated devices through sysfs on a fixture vGPU host, with the simulated kernel acting."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from pkg.backends.simulated.pci_kernel import SimulatedPciKernel
from pkg.hardware.mdev import MdevError, MdevHost, VgpuLayout, mdev_types, new_mdev_uuid, vgpu_layout

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
T4 = "0000:3b:00.0"
Q4, Q8 = "nvidia-232", "nvidia-233"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "t4-vgpu", tmp_path / "sys", symlinks=True)
    return tmp_path


def _mdevs(host: Path) -> MdevHost:
    return MdevHost(host / "sys", kernel=SimulatedPciKernel(sysfs_root=host / "sys", dev_root=host / "dev"))


def _available(host: Path) -> dict[str, int]:
    return {t.type_id: t.available_instances for t in mdev_types(host / "sys", T4)}


def test_types_are_read_with_framebuffer_and_instances(host: Path) -> None:
    types = {t.type_id: t for t in mdev_types(host / "sys", T4)}
    assert set(types) == {"nvidia-232", "nvidia-233", "nvidia-234", "nvidia-319"}
    q4 = types[Q4]
    assert (q4.name, q4.framebuffer_mib, q4.max_instances) == ("GRID T4-4Q", 4096, 4)
    assert q4.available_instances == 4
    assert q4.device_api == "vfio-pci"


def test_layouts_come_from_sysfs(host: Path) -> None:
    assert vgpu_layout(host / "sys", T4) is VgpuLayout.MDEV
    assert vgpu_layout(FIXTURES / "a30-x2", "0000:3b:00.0") is VgpuLayout.NONE
    # A card whose VFs carry the vendor-specific vGPU files (Ada/Hopper with vGPU 17+).
    vf = host / "sys" / "vf"
    (vf / "nvidia").mkdir(parents=True)
    (vf / "nvidia" / "creatable_vgpu_types").write_text("ID    : vGPU Name\n")
    card = host / "sys" / "bus" / "pci" / "devices" / "0000:d8:00.0"
    shutil.rmtree(card / "mdev_supported_types")
    (card / "virtfn0").symlink_to(vf)
    assert vgpu_layout(host / "sys", "0000:d8:00.0") is VgpuLayout.SRIOV_VF


def test_create_and_remove_follow_the_kernel(host: Path) -> None:
    mdevs = _mdevs(host)
    first, second = new_mdev_uuid(), new_mdev_uuid()
    mdevs.create(T4, Q4, first)
    mdevs.create(T4, Q4, first)  # idempotent
    assert mdevs.parent_and_type(first) == (T4, Q4)
    group = mdevs.iommu_group(first)
    assert (host / "dev" / "vfio" / group).is_char_device()
    assert (host / "dev" / "vfio" / "vfio").is_char_device()
    assert _available(host) == {Q4: 3, Q8: 0, "nvidia-234": 0, "nvidia-319": 0}  # one type per card
    mdevs.create(T4, Q4, second)
    assert mdevs.iommu_group(second) != group
    assert mdevs.of_card(T4) == sorted([first, second])

    assert mdevs.remove(first)
    assert not mdevs.remove(first)  # idempotent
    assert not (host / "dev" / "vfio" / group).exists()
    mdevs.remove(second)
    assert _available(host) == {Q4: 4, Q8: 2, "nvidia-234": 1, "nvidia-319": 4}
    assert mdevs.of_card(T4) == []


def test_the_kernels_refusals_reach_the_caller(host: Path) -> None:
    mdevs = _mdevs(host)
    taken = new_mdev_uuid()
    mdevs.create(T4, Q4, taken)
    with pytest.raises(OSError, match="no instance of nvidia-233") as refused:
        mdevs.create(T4, Q8, new_mdev_uuid())  # another type on a card with vGPUs
    assert refused.value.errno == errno.EUSERS
    with pytest.raises(MdevError, match="exists as type"):
        mdevs.create("0000:d8:00.0", Q4, taken)
    with pytest.raises(MdevError, match="has no vGPU type"):
        mdevs.create(T4, "nvidia-999", new_mdev_uuid())
    with pytest.raises(ValueError, match="not an mdev UUID"):
        mdevs.create(T4, Q4, "../../x")
