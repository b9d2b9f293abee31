"""The container's root holds busybox, the program and the glibc files it loads — and nothing of
NVIDIA's driver, so a CUDA program there can only reach the GPU through our CDI specs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from testutil.tools import require_file

from pkg.hardwaretier.libraries import interpreter
from pkg.hardwaretier.rootfs import BUSYBOX, GLIBC_LIBRARIES, RootfsError, build_rootfs, nvidia_files

PROGRAM = Path("/usr/bin/env")  # dynamically linked on every Debian host


@pytest.fixture
def busybox() -> Path:
    return require_file(BUSYBOX, "make host-packages installs busybox-static")


@pytest.mark.usefixtures("busybox")
def test_the_root_holds_busybox_the_program_and_its_libraries_at_their_paths(tmp_path: Path) -> None:
    root = build_rootfs(tmp_path / "rootfs", program=PROGRAM)

    assert root.program == "/usr/local/bin/env"
    assert (root.path / "usr/local/bin/env").read_bytes() == PROGRAM.read_bytes()
    assert (root.path / "bin/busybox").read_bytes() == BUSYBOX.read_bytes()
    assert (root.path / "bin/sh").readlink() == Path("busybox")
    assert interpreter(PROGRAM) in root.libraries
    for library in root.libraries:
        copied = root.path / library.lstrip("/")
        assert copied.is_file(), library
        assert not copied.is_symlink(), f"{library}: a link would point back into the host"
    assert nvidia_files(root.path) == []


@pytest.mark.usefixtures("busybox")
def test_the_root_holds_the_rest_of_glibc_beside_libc_for_the_drivers_libraries(tmp_path: Path) -> None:
    """libcuda.so.1 links libdl, libpthread and librt, which the program itself never loads."""
    root = build_rootfs(tmp_path / "rootfs", program=PROGRAM)

    libc = next(Path(library) for library in root.libraries if Path(library).name == "libc.so.6")
    present = [name for name in GLIBC_LIBRARIES if (Path("/lib/x86_64-linux-gnu") / name).is_file()]
    assert "libdl.so.2" in present
    for name in present:
        copied = root.path / libc.parent.relative_to("/") / name
        assert copied.is_file(), name
        assert str(libc.parent / name) in root.libraries
    assert len(root.libraries) == len(set(root.libraries))


@pytest.mark.usefixtures("busybox")
def test_a_program_linking_the_driver_is_refused(tmp_path: Path) -> None:
    listing = "\tlibcuda.so.1 => /usr/lib/x86_64-linux-gnu/libcuda.so.1 (0x00007f0000000000)\n"

    def loader(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, stdout=listing, stderr="")

    with pytest.raises(
        RootfsError, match=r"links the NVIDIA driver's /usr/lib/x86_64-linux-gnu/libcuda.so.1"
    ):
        build_rootfs(tmp_path / "rootfs", program=PROGRAM, run=loader)


def test_a_dynamic_busybox_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        RootfsError, match=r"/usr/bin/env is dynamically linked: install Debian's busybox-static"
    ):
        build_rootfs(tmp_path / "rootfs", program=PROGRAM, busybox=PROGRAM)


def test_a_missing_busybox_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        RootfsError, match=r"/nonexistent/busybox is missing: install Debian's busybox-static"
    ):
        build_rootfs(tmp_path / "rootfs", program=PROGRAM, busybox=Path("/nonexistent/busybox"))


def test_driver_files_anywhere_in_a_root_are_found(tmp_path: Path) -> None:
    for planted in ("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "usr/bin/nvidia-smi", "lib/libcuda.so.1"):
        (tmp_path / planted).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / planted).write_text("")
    (tmp_path / "usr/local/bin").mkdir(parents=True)
    (tmp_path / "usr/local/bin/cuda_ok").write_text("")  # our program is not the driver's

    assert nvidia_files(tmp_path) == [
        "/lib/libcuda.so.1",
        "/usr/bin/nvidia-smi",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    ]


@pytest.mark.parametrize(
    "planted",
    [
        "usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0",
        "usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.580.159.04",
        "usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.1",
        "usr/share/vulkan/icd.d/nvidia_icd.json",
        "usr/share/glvnd/egl_vendor.d/10_nvidia.json",
        "etc/OpenCL/vendors/nvidia.icd",
    ],
)
def test_the_drivers_graphics_files_and_the_loaders_files_naming_them_are_found(
    tmp_path: Path, planted: str
) -> None:
    (tmp_path / planted).parent.mkdir(parents=True)
    (tmp_path / planted).write_text("")

    assert nvidia_files(tmp_path) == [f"/{planted}"]


def test_the_loaders_own_libraries_are_not_the_drivers(tmp_path: Path) -> None:
    for name in ("libvulkan.so.1", "libEGL.so.1", "libGLdispatch.so.0", "libOpenCL.so.1", "libX11.so.6"):
        (tmp_path / name).write_text("")

    assert nvidia_files(tmp_path) == []


@pytest.mark.usefixtures("busybox")
def test_a_root_given_libglx_nvidia_is_refused(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    (extra / "usr/lib").mkdir(parents=True)
    (extra / "usr/lib/libGLX_nvidia.so.0").write_text("")

    with pytest.raises(
        RootfsError, match=re.escape("holds files of the NVIDIA driver: /usr/lib/libGLX_nvidia.so.0")
    ):
        build_rootfs(tmp_path / "rootfs", program=PROGRAM, extra_roots=[extra])
    with pytest.raises(RootfsError, match="must exist"):
        build_rootfs(tmp_path / "rootfs2", program=PROGRAM, extra_roots=[tmp_path / "absent"])
