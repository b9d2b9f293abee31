"""The loaders' Debian packages make a container root the guard accepts, and in that root — runc,
no CDI device — each probe finds its loader and says, in one line, that the driver's part is
missing: what a container given no GPU files sees, and the baseline the hardware tier's lines
are read against."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from testutil.tools import require, require_file, require_program

from pkg.hardwaretier.bundle import ROOTFS, cgroups_path, container_config, runc_spec, write_config
from pkg.hardwaretier.loader_packages import (
    LoaderPackageError,
    Pin,
    default_debs_dir,
    ensure_debs,
    extract_debs,
    find_debs,
    read_pins,
)
from pkg.hardwaretier.probes import DLOPEN, EGL, NVENC, OPENCL, PROBES, VULKAN, build_probes, find_compiler
from pkg.hardwaretier.rootfs import BUSYBOX, RootfsError, build_rootfs, nvidia_files
from pkg.hardwaretier.runc import run_container

GRAPHICS = Path(__file__).resolve().parents[2] / "hardware" / "graphics"
PINS = GRAPHICS / "loader-packages.txt"


@pytest.fixture(scope="module")
def debs() -> dict[str, Path]:
    """The pinned packages, fetched once into the project's cache (apt-get download, no root)."""
    require_program("dpkg-deb", "Debian's dpkg")
    try:
        return ensure_debs(default_debs_dir(), read_pins(PINS))
    except LoaderPackageError as exc:
        require(False, f"the loader packages cannot be had here: {exc}")
        raise


@pytest.fixture(scope="module")
def loaders(debs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_debs(debs, tmp_path_factory.mktemp("loaders") / "root")


def test_the_pins_name_the_loaders_and_what_the_drivers_graphics_libraries_link() -> None:
    packages = {pin.package for pin in read_pins(PINS)}

    assert {"libvulkan1", "libegl1", "libglvnd0", "ocl-icd-libopencl1"} <= packages
    assert {"libx11-6", "libxext6", "libxcb1"} <= packages, "libGLX_nvidia (the Vulkan ICD) links them"
    assert "libegl-mesa0" not in packages, "Mesa's vendor file would give EGL a device that is not the card"


def test_a_pin_accepts_its_release_with_any_debian_revision() -> None:
    pin = Pin(package="libx11-6", pattern="2:1.8.4-*")

    assert pin.accepts("2:1.8.4-2+deb12u2")
    assert not pin.accepts("2:1.8.5-1")
    assert not pin.accepts("1.8.4-2"), "the epoch is part of the version"


def test_a_malformed_pin_list_is_named_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "pins.txt").write_text("# comment\nlibvulkan1\n")
    with pytest.raises(LoaderPackageError, match=r"pins.txt:2: expected '<package> <version pattern>'"):
        read_pins(tmp_path / "pins.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    with pytest.raises(LoaderPackageError, match="names no package"):
        read_pins(tmp_path / "empty.txt")


def test_every_pinned_package_is_found_by_its_control_file(debs: dict[str, Path]) -> None:
    assert set(debs) == {pin.package for pin in read_pins(PINS)}


def test_a_package_at_another_version_or_absent_is_named(debs: dict[str, Path], tmp_path: Path) -> None:
    folder = debs["libvulkan1"].parent
    pins = [Pin("libvulkan1", "9.9.9-*"), Pin("libvulkan-absent", "1.0-*")]

    with pytest.raises(LoaderPackageError) as raised:
        find_debs(folder, pins)

    assert "libvulkan1 9.9.9-* (there: 1.3.239.0-1)" in str(raised.value)
    assert "libvulkan-absent 1.0-*" in str(raised.value)
    with pytest.raises(LoaderPackageError, match="lacks the loader packages libvulkan1"):
        find_debs(tmp_path / "no-such-folder", pins[:1])


def test_the_unpacked_loaders_hold_their_sonames_and_nothing_of_the_drivers(loaders: Path) -> None:
    libraries = loaders / "usr/lib/x86_64-linux-gnu"
    for soname in ("libvulkan.so.1", "libEGL.so.1", "libGLdispatch.so.0", "libOpenCL.so.1", "libX11.so.6"):
        assert (libraries / soname).exists(), soname
    assert (libraries / "libvulkan.so.1").is_symlink(), "the packages' links are kept"
    assert nvidia_files(loaders) == []
    assert not list(loaders.rglob("*.json")), "no ICD or vendor file: those must come from our CDI specs"


def test_a_package_holding_a_driver_file_is_refused(tmp_path: Path) -> None:
    require_program("dpkg-deb", "Debian's dpkg")
    package = tmp_path / "pkg"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        "Package: sneaky\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: t\n"
    )
    (package / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (package / "usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0").write_text("")
    deb = tmp_path / "sneaky.deb"
    subprocess.run(["dpkg-deb", "--build", str(package), str(deb)], check=True, capture_output=True)

    with pytest.raises(LoaderPackageError, match=re.escape("/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0")):
        extract_debs({"sneaky": deb}, tmp_path / "root")


@pytest.mark.usefixtures("loaders")
def test_the_root_takes_the_loaders_and_the_guard_still_refuses_a_driver_file(
    loaders: Path, tmp_path: Path
) -> None:
    require_file(BUSYBOX, "make host-packages installs busybox-static")
    root = build_rootfs(tmp_path / "ok", program=Path("/usr/bin/env"), extra_roots=[loaders])
    assert (root.path / "usr/lib/x86_64-linux-gnu/libvulkan.so.1").exists()

    planted = tmp_path / "planted"
    (planted / "usr/share/vulkan/icd.d").mkdir(parents=True)
    (planted / "usr/share/vulkan/icd.d/nvidia_icd.json").write_text("{}")
    with pytest.raises(RootfsError, match=re.escape("/usr/share/vulkan/icd.d/nvidia_icd.json")):
        build_rootfs(tmp_path / "refused", program=Path("/usr/bin/env"), extra_roots=[loaders, planted])


@pytest.mark.skipif(os.geteuid() != 0, reason="runc runs the container as root")
def test_in_a_root_of_the_loaders_alone_each_probe_names_what_is_missing(
    loaders: Path, tmp_path: Path
) -> None:
    runc = require_program("runc", "make host-packages installs it")
    require_file(BUSYBOX, "make host-packages installs busybox-static")
    compiler = find_compiler()
    require(compiler is not None, "no gcc (install gcc and libc6-dev)")
    assert compiler is not None
    probes = build_probes(compiler, source_dir=GRAPHICS, output_dir=tmp_path / "probes")
    expected = {
        VULKAN: "VULKAN FAIL vkCreateInstance -9 (VK_ERROR_INCOMPATIBLE_DRIVER: no ICD found)",
        EGL: "EGL FAIL eglQueryDevicesEXT found no device",
        OPENCL: "OPENCL FAIL clGetPlatformIDs -1001 (CL_PLATFORM_NOT_FOUND_KHR",
        NVENC: "NVENC FAIL cannot load libnvidia-encode.so.1: ",
        DLOPEN: "NOT LOADED libGLX_nvidia.so.0: ",
    }
    assert set(expected) < set(PROBES)

    for name, line in expected.items():
        bundle = tmp_path / name
        rootfs = build_rootfs(bundle / ROOTFS, program=probes[name], extra_roots=[loaders])
        args = [rootfs.program, "libGLX_nvidia.so.0"] if name == DLOPEN else [rootfs.program]
        container_id = f"unit-{name}-{os.getpid()}"
        base = runc_spec(runc, bundle)
        write_config(bundle, container_config(base, args=args, cgroups_path=cgroups_path(container_id)))
        run = run_container(runc, bundle=bundle, container_id=container_id, state_root=tmp_path / "runc")

        assert run.returncode == 1, run.describe()
        assert run.stdout.startswith(line), run.describe()
        assert run.stdout.count("\n") == 1, run.describe()
