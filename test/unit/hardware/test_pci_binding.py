"""Driver binding through sysfs on a fixture host, with the simulated kernel acting on the writes."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from pkg.backends.simulated.pci_kernel import SimulatedPciKernel
from pkg.hardware.pci_binding import VFIO_PCI, PciDriverBinding

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
RTX, AUDIO = "0000:65:00.0", "0000:65:00.1"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "rtx-workstation", tmp_path / "sys", symlinks=True)
    return tmp_path


def _binding(host: Path) -> PciDriverBinding:
    kernel = SimulatedPciKernel(sysfs_root=host / "sys", dev_root=host / "dev")
    return PciDriverBinding(host / "sys", kernel=kernel, settle_timeout=0.2)


def test_bind_to_vfio_and_restore_move_the_links_and_the_group_node(host: Path) -> None:
    binding = _binding(host)
    binding.bind(RTX, VFIO_PCI)
    binding.bind(AUDIO, VFIO_PCI)
    assert (binding.driver(RTX), binding.driver(AUDIO)) == (VFIO_PCI, VFIO_PCI)
    assert binding.override(RTX) == VFIO_PCI
    assert os.path.islink(host / "sys" / "bus" / "pci" / "drivers" / VFIO_PCI / RTX)
    assert not os.path.lexists(host / "sys" / "bus" / "pci" / "drivers" / "nvidia" / RTX)
    assert (host / "dev" / "vfio" / "28").is_char_device()
    binding.bind(RTX, VFIO_PCI)  # idempotent

    binding.restore(RTX, "nvidia")
    assert (host / "dev" / "vfio" / "28").exists()  # the audio function still holds the group
    binding.restore(AUDIO, "snd_hda_intel")
    binding.restore(AUDIO, "snd_hda_intel")  # idempotent
    assert (binding.driver(RTX), binding.driver(AUDIO)) == ("nvidia", "snd_hda_intel")
    assert (binding.override(RTX), binding.override(AUDIO)) == (None, None)
    assert not (host / "dev" / "vfio" / "28").exists()


def test_the_kernels_refusals_reach_the_caller(host: Path) -> None:
    binding = _binding(host)
    override = host / "sys" / "bus" / "pci" / "devices" / RTX / "driver_override"
    override.write_text("nvidia\n")  # an override for another driver: vfio-pci may not take it
    (host / "sys" / "bus" / "pci" / "devices" / RTX / "driver").unlink()
    with pytest.raises(OSError, match="may only be bound to") as refused:
        SimulatedPciKernel(sysfs_root=host / "sys", dev_root=host / "dev").written(
            host / "sys" / "bus" / "pci" / "drivers" / VFIO_PCI / "bind", RTX
        )
    assert refused.value.errno == errno.ENODEV

    shutil.rmtree(host / "sys" / "bus" / "pci" / "drivers" / VFIO_PCI)
    with pytest.raises(OSError, match="vfio-pci is not loaded"):
        binding.bind(AUDIO, VFIO_PCI)


def test_vfio_needs_an_iommu_group_and_bad_names_are_refused(host: Path) -> None:
    binding = _binding(host)
    (host / "sys" / "bus" / "pci" / "devices" / AUDIO / "iommu_group").unlink()
    with pytest.raises(OSError, match="no IOMMU group"):
        binding.bind(AUDIO, VFIO_PCI)
    with pytest.raises(ValueError, match="not a PCI address"):
        binding.bind("../../etc", VFIO_PCI)
    with pytest.raises(ValueError, match="not a kernel driver name"):
        binding.bind(RTX, "../nvidia")
    with pytest.raises(OSError, match="does not exist"):
        binding.driver("0000:99:00.0")


def test_a_driver_that_does_not_take_the_function_is_an_error_naming_both(host: Path) -> None:
    class LazyKernel:
        def written(self, path: Path, value: str) -> None:
            return None  # the write succeeded but the driver's probe did not take the function

    binding = PciDriverBinding(host / "sys", kernel=LazyKernel(), settle_timeout=0.1)
    with pytest.raises(OSError, match=f"{RTX} is bound to nvidia after binding it to {VFIO_PCI}"):
        binding.bind(RTX, VFIO_PCI)
