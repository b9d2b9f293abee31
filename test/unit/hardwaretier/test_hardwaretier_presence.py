"""Without a GPU the hardware tier stops at once, says why, and exits with a code of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pkg.hardwaretier.presence import (
    EXIT_NO_GPU,
    EXIT_NOT_ROOT,
    NO_GPU,
    NoGpuError,
    NotRootError,
    check_gpu,
    check_root,
)

ROOT = Path(__file__).resolve().parents[3]


def _control_node(dev: Path) -> Path:
    dev.mkdir(exist_ok=True)
    (dev / "nvidiactl").write_text("")  # only its existence is checked
    return dev


def test_a_machine_without_the_control_node_has_no_gpu(tmp_path: Path) -> None:
    def never_called() -> int:
        raise AssertionError("NVML must not be loaded without the driver's control node")

    with pytest.raises(NoGpuError) as error:
        check_gpu(dev_root=tmp_path, count_cards=never_called)

    assert (
        str(error.value)
        == f"{NO_GPU}: {tmp_path}/nvidiactl does not exist (is the nvidia kernel module loaded?)"
    )


def test_nvml_that_cannot_load_means_no_gpu(tmp_path: Path) -> None:
    def missing_library() -> int:
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    with pytest.raises(NoGpuError, match=r"NVML cannot load: libnvidia-ml.so.1: cannot open") as error:
        check_gpu(dev_root=_control_node(tmp_path / "dev"), count_cards=missing_library)

    assert str(error.value).startswith("no NVIDIA GPU (no /dev/nvidiactl / NVML cannot load): ")


def test_nvml_that_sees_no_card_means_no_gpu(tmp_path: Path) -> None:
    with pytest.raises(NoGpuError, match="NVML loads but sees no card"):
        check_gpu(dev_root=_control_node(tmp_path / "dev"), count_cards=lambda: 0)


def test_a_gpu_is_counted(tmp_path: Path) -> None:
    assert check_gpu(dev_root=_control_node(tmp_path / "dev"), count_cards=lambda: 2) == 2


def test_the_tier_needs_root() -> None:
    check_root(euid=0)
    with pytest.raises(NotRootError, match=r"runs as root .* euid is 1000"):
        check_root(euid=1000)


def test_the_exit_codes_differ_from_each_other_and_from_pytests_own() -> None:
    pytest_codes = {int(code) for code in pytest.ExitCode}
    ours = {EXIT_NO_GPU, EXIT_NOT_ROOT}
    assert len(ours) == 2
    assert ours.isdisjoint(pytest_codes)


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has an NVIDIA GPU")
def test_the_tier_on_a_machine_without_a_gpu_stops_with_its_exit_code() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test/hardware",
            "--confcutdir=test/hardware",
            "-q",
            "-p",
            "no:randomly",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert result.returncode == EXIT_NO_GPU, result.stdout + result.stderr
    assert NO_GPU in result.stdout + result.stderr
    assert " passed" not in result.stdout
