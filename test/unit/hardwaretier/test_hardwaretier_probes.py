"""The graphics, video and OpenCL probes build with gcc alone and, on a host (or in a container
root) without the GPU's files, each prints its one line with the reason and exits non-zero —
never a crash or a loader error before ``main``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from testutil.tools import require

from pkg.hardwaretier.probes import (
    DLOPEN,
    EGL,
    NVDEC,
    NVENC,
    PROBES,
    PROGRAMS_ENV,
    VULKAN,
    ProbeBuildError,
    build_probes,
    compile_command,
    find_compiler,
    prebuilt_probes,
    probe_line,
)

SOURCES = Path(__file__).resolve().parents[2] / "hardware" / "graphics"


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    compiler = find_compiler()
    require(compiler is not None, "no gcc (install gcc and libc6-dev)")
    assert compiler is not None
    return build_probes(compiler, source_dir=SOURCES, output_dir=tmp_path_factory.mktemp("probes"))


def _run(program: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(program), *args], capture_output=True, text=True, check=False, timeout=60, env=env
    )


def test_every_probe_compiles_without_a_warning(tmp_path: Path) -> None:
    compiler = find_compiler()
    require(compiler is not None, "no gcc (install gcc and libc6-dev)")
    assert compiler is not None
    for name in PROBES:
        argv = compile_command(compiler, source=SOURCES / f"{name}.c", output=tmp_path / name)
        result = subprocess.run([*argv, "-Werror"], capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{name}:\n{result.stderr}"
        assert result.stderr == "", f"{name} warns:\n{result.stderr}"


@pytest.mark.parametrize(
    ("name", "soname"),
    [
        (NVENC, "libnvidia-encode.so.1"),
        (NVDEC, "libnvcuvid.so.1"),
    ],
)
def test_without_the_drivers_video_library_the_probe_says_so_in_one_line(
    probes: dict[str, Path], name: str, soname: str
) -> None:
    result = _run(probes[name])

    check = name.removesuffix("_probe").upper()
    assert result.returncode == 1, result
    assert result.stdout.startswith(f"{check} FAIL cannot load {soname}: ")
    assert result.stdout.count("\n") == 1, "one line"


def test_a_library_missing_from_the_loaders_path_is_not_loaded(probes: dict[str, Path]) -> None:
    result = _run(probes[DLOPEN], "libGLX_nvidia.so.0")

    assert result.returncode == 1
    assert result.stdout.startswith("NOT LOADED libGLX_nvidia.so.0: ")
    assert _run(probes[DLOPEN]).returncode == 64, "no soname: a usage line, not a crash"
    assert _run(probes[DLOPEN], "libc.so.6").stdout == "LOADED libc.so.6\n"


def test_the_egl_probe_makes_a_surfaceless_context_where_a_vendor_serves_one(probes: dict[str, Path]) -> None:
    """The positive path, on whatever EGL vendor this host has (Mesa's software renderer on a
    Debian host with libegl-mesa0): devices, device display, context, renderer."""
    require(
        any(Path(d, "libEGL.so.1").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu")),
        "no libEGL.so.1 on this host (Debian's libegl1 and libegl-mesa0)",
    )
    result = _run(probes[EGL])

    require(result.returncode == 0, f"this host's EGL gives no device context: {result.stdout.strip()}")
    assert result.stdout.startswith("EGL OK ")
    assert " devices " in result.stdout
    assert " renderer " in result.stdout


def test_probe_line_finds_the_line_among_other_output() -> None:
    output = "nvidia-cdi-hook: created link\nVULKAN OK NVIDIA H200 api 1.4.312\n"

    assert probe_line(output) == "VULKAN OK NVIDIA H200 api 1.4.312"
    assert probe_line("NOT LOADED libGLX_nvidia.so.0: no file\n") == "NOT LOADED libGLX_nvidia.so.0: no file"
    assert probe_line("Segmentation fault\n") is None


def test_prebuilt_probes_come_from_the_named_folder_and_a_missing_one_is_named(tmp_path: Path) -> None:
    assert prebuilt_probes({}) is None
    for name in PROBES[:-1]:
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)

    with pytest.raises(ProbeBuildError, match=f"lacks the executable probes {DLOPEN}$"):
        prebuilt_probes({PROGRAMS_ENV: str(tmp_path)})

    (tmp_path / DLOPEN).write_text("")
    (tmp_path / DLOPEN).chmod(0o755)
    found = prebuilt_probes({PROGRAMS_ENV: str(tmp_path)})
    assert found is not None
    assert found[VULKAN] == tmp_path / VULKAN


def test_a_failing_build_names_the_probe_with_the_compilers_output(tmp_path: Path) -> None:
    compiler = find_compiler()
    require(compiler is not None, "no gcc (install gcc and libc6-dev)")
    assert compiler is not None
    (tmp_path / "broken.c").write_text("int main(void) { return undeclared; }\n")

    with pytest.raises(ProbeBuildError, match=r"(?s)building broken: .*undeclared"):
        build_probes(compiler, source_dir=tmp_path, output_dir=tmp_path / "out", names=["broken"])


def test_the_compiler_is_cc_else_gcc_on_path(tmp_path: Path) -> None:
    (tmp_path / "gcc").write_text("")
    (tmp_path / "gcc").chmod(0o755)

    assert find_compiler({"CC": "/opt/cc"}) == Path("/opt/cc")
    assert find_compiler({"PATH": str(tmp_path)}) == tmp_path / "gcc"
    assert find_compiler({"PATH": str(tmp_path / "none")}) is None
