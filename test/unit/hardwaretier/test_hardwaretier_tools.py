"""The tier finds nvcc, runc and a prebuilt CUDA program where the docs say, builds the program
with the static CUDA runtime for the card's own architecture, and reads its verdict line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkg.hardwaretier.cuda_build import (
    CudaBuildError,
    build_program,
    find_nvcc,
    nvcc_command,
    prebuilt_program,
    product_of,
)
from pkg.hardwaretier.runc import ContainerRun, find_runc, run_container


def _executable(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_nvcc_is_looked_for_in_the_documented_order(tmp_path: Path) -> None:
    on_path = _executable(tmp_path / "path", "nvcc")
    in_home = _executable(tmp_path / "cuda" / "bin", "nvcc")

    assert find_nvcc({"NVCC": "/opt/nvcc", "PATH": str(on_path.parent)}) == Path("/opt/nvcc")
    assert find_nvcc({"PATH": str(on_path.parent), "CUDA_HOME": str(tmp_path / "cuda")}) == on_path
    assert find_nvcc({"PATH": str(tmp_path), "CUDA_HOME": str(tmp_path / "cuda")}) == in_home


def test_no_nvcc_is_none_so_the_step_can_be_skipped(tmp_path: Path) -> None:
    if Path("/usr/local/cuda/bin/nvcc").is_file():
        pytest.skip("this machine has CUDA in /usr/local/cuda")
    assert find_nvcc({"PATH": str(tmp_path)}) is None


def test_the_program_links_the_cuda_runtime_statically_for_the_cards_architecture() -> None:
    argv = nvcc_command(Path("nvcc"), source=Path("ok.cu"), output=Path("ok"), compute_capability=(9, 0))

    assert argv == [
        "nvcc",
        "-O2",
        "-cudart",
        "static",
        "--generate-code",
        "arch=compute_90,code=[compute_90,sm_90]",
        "-o",
        "ok",
        "ok.cu",
    ]


def test_a_failed_build_shows_the_command_and_the_compilers_words(tmp_path: Path) -> None:
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'nvcc fatal   : Unsupported gpu architecture compute_120' >&2\nexit 1\n")
    nvcc.chmod(0o755)

    with pytest.raises(
        CudaBuildError, match=r"(?s)arch=compute_120.*failed \(exit 1\):\nnvcc fatal   : Unsupported"
    ):
        build_program(nvcc, source=Path("ok.cu"), output=tmp_path / "ok", compute_capability=(12, 0))


def test_a_prebuilt_program_must_be_an_executable_file(tmp_path: Path) -> None:
    program = _executable(tmp_path, "cuda_ok")

    assert prebuilt_program({}) is None
    assert prebuilt_program({"GPU_CP_CUDA_PROGRAM": str(program)}) == program
    with pytest.raises(
        FileNotFoundError, match=r"\$GPU_CP_CUDA_PROGRAM=/nonexistent is not an executable file"
    ):
        prebuilt_program({"GPU_CP_CUDA_PROGRAM": "/nonexistent"})


def test_the_verdict_line_names_the_product() -> None:
    output = "devices 1\ndevice 0: NVIDIA H200, compute capability 9.0\nCUDA OK NVIDIA H200\n"

    assert product_of(output) == "NVIDIA H200"
    assert product_of("cudaGetDeviceCount(&count) failed: cudaErrorInsufficientDriver\n") is None


def test_runc_comes_from_the_variable_then_path(tmp_path: Path) -> None:
    named = _executable(tmp_path / "named", "runc")
    on_path = _executable(tmp_path / "path", "runc")

    assert find_runc({"GPU_CP_RUNC": str(named), "PATH": str(on_path.parent)}) == named
    assert find_runc({"PATH": str(on_path.parent)}) == on_path
    with pytest.raises(
        FileNotFoundError, match=r"runc is not on PATH: install Debian's runc package or set \$GPU_CP_RUNC"
    ):
        find_runc({"PATH": str(tmp_path)})
    with pytest.raises(FileNotFoundError, match=r"\$GPU_CP_RUNC=/nonexistent is not an executable file"):
        find_runc({"GPU_CP_RUNC": "/nonexistent"})


def test_a_container_that_hangs_is_reported_and_deleted(tmp_path: Path) -> None:
    runc = tmp_path / "runc"
    calls = tmp_path / "calls"
    runc.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$3" = run ] && exec sleep 30\nexit 0\n')
    runc.chmod(0o755)

    run = run_container(
        runc, bundle=tmp_path / "b", container_id="c1", state_root=tmp_path / "state", timeout=0.5
    )

    assert run.returncode == -1
    assert run.stderr.endswith("(timed out after 0.5s)")
    lines = calls.read_text().splitlines()
    assert lines[-1] == f"--root {tmp_path / 'state'} delete --force c1"


def test_the_runs_description_holds_both_streams() -> None:
    run = ContainerRun(
        container_id="c1", returncode=2, stdout="devices 1\n", stderr="cudaErrorInsufficientDriver\n"
    )

    assert run.describe() == "container c1 exited 2\nstdout:\ndevices 1\nstderr:\ncudaErrorInsufficientDriver"
