"""The driver's user space is found under a driver root as real installs lay it out.

Each layout is a stand-in driver built with real shared objects (pkg.devcluster.driverroot): a
distribution's packages on the host root, a containerised driver's root, and a driver folder of
its own like the H200 node's /usr/local/nvidia.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from pkg.backends.driver_files import (
    REASON_HOOK_MISSING,
    REASON_ROOT_INCOMPLETE,
    REASON_ROOT_MISSING,
    REASON_VERSION_MISMATCH,
    DriverFiles,
    DriverFilesError,
    DriverRootOptions,
    SuppliedFile,
)
from pkg.backends.nvidia import driver_root
from pkg.backends.nvidia.backend import NvidiaBackend
from pkg.backends.nvidia.driver_root import LIBRARY_FOLDER, discover_driver_files
from pkg.devcluster.cluster import default_bin_dir
from pkg.devcluster.driverroot import SMI_OUTPUT, Layout, build_driver_root
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.hardware.elf import ElfError, read_dynamic_info

VERSION = "580.159.04"
HOOK = Path("/var/lib/kubelet/plugins/gpu.deckhouse.io/bin/nvidia-cdi-hook-0123456789ab")
COMPUTE_AND_UTILITY = {
    "libcuda.so.580.159.04",
    "libcudadebugger.so.580.159.04",
    "libnvidia-ptxjitcompiler.so.580.159.04",
    "libnvidia-nvvm.so.580.159.04",
    "libnvidia-gpucomp.so.580.159.04",
    "libnvidia-ml.so.580.159.04",
    "libnvidia-cfg.so.580.159.04",
    "libnvidia-opencl.so.580.159.04",  # OpenCL, the allocator and PKCS#11 are compute (NVIDIA's split)
    "libnvidia-allocator.so.580.159.04",
    "libnvidia-pkcs11-openssl3.so.580.159.04",
}


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[Layout, Path]:
    base = tmp_path_factory.mktemp("driver-roots")
    return {
        layout: build_driver_root(base / layout, layout=layout, version=VERSION).root for layout in Layout
    }


def _options(root: Path, **kwargs: object) -> DriverRootOptions:
    """Compute and utility unless told otherwise (the node's default is every capability)."""
    kwargs.setdefault("capabilities", frozenset({"compute", "utility"}))
    return DriverRootOptions(root=root, root_on_host=Path("/host-root"), cdi_hook=HOOK, **kwargs)  # type: ignore[arg-type]


def _library_mounts(files: DriverFiles) -> dict[str, str]:
    return {
        Path(m.container_path).name: m.host_path
        for m in files.edits.mounts
        if m.container_path.startswith(LIBRARY_FOLDER)
    }


@pytest.mark.parametrize("layout", list(Layout))
def test_each_layout_gives_the_compute_and_utility_libraries_tools_and_firmware(
    roots: dict[Layout, Path], layout: Layout
) -> None:
    files = discover_driver_files(_options(roots[layout]), version=VERSION, dev_root=Path("/dev"))

    libraries = _library_mounts(files)
    assert set(libraries) == COMPUTE_AND_UTILITY  # no graphics or video library unless asked for
    assert all(host.startswith("/host-root/") for host in libraries.values())  # the host's path
    assert all(m.options[0] == "ro" for m in files.edits.mounts)
    containers = {m.container_path for m in files.edits.mounts}
    assert {"/usr/bin/nvidia-smi", "/usr/bin/nvidia-cuda-mps-control"} <= containers
    assert f"/lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin" in containers
    # The OpenCL ICD file: found where the root has one, supplied where it lacks it.
    icd = {"configs": 0, "supplied": 1} if layout is Layout.VENDOR_FOLDER else {"configs": 1}
    assert files.found == {"libraries": 10, "binaries": 5, "firmware": 2, "sockets": 0, **icd}


def test_the_hooks_make_the_soname_links_and_put_the_library_folder_in_the_ld_cache(
    roots: dict[Layout, Path],
) -> None:
    files = discover_driver_files(_options(roots[Layout.VENDOR_FOLDER]), version=VERSION)

    links, compat, ldcache, params = files.edits.hooks
    assert {h.path for h in files.edits.hooks} == {str(HOOK)}
    assert {h.hook_name for h in files.edits.hooks} == {"createContainer"}
    pairs = set(links.args[3::2])
    assert f"libcuda.so.{VERSION}::{LIBRARY_FOLDER}/libcuda.so.1" in pairs
    assert f"libcuda.so.1::{LIBRARY_FOLDER}/libcuda.so" in pairs
    assert f"libnvidia-nvvm.so.{VERSION}::{LIBRARY_FOLDER}/libnvidia-nvvm.so.4" in pairs  # its real soname
    assert f"libnvidia-nvvm.so.4::{LIBRARY_FOLDER}/libnvidia-nvvm.so" in pairs
    # Its soname is its file name: no soname link, the unversioned name points at the file.
    assert [p for p in pairs if "gpucomp" in p] == [
        f"libnvidia-gpucomp.so.{VERSION}::{LIBRARY_FOLDER}/libnvidia-gpucomp.so"
    ]
    assert not any("gbm" in pair for pair in pairs)  # the GBM backend only with graphics
    assert compat.args == ("nvidia-cdi-hook", "enable-cuda-compat", f"--host-driver-version={VERSION}")
    assert ldcache.args == ("nvidia-cdi-hook", "update-ldcache", "--folder", LIBRARY_FOLDER)
    assert params.args == ("nvidia-cdi-hook", "disable-device-node-modification")


def test_graphics_and_video_libraries_come_only_when_configured(roots: dict[Layout, Path]) -> None:
    options = _options(
        roots[Layout.HOST], capabilities=frozenset({"compute", "utility", "graphics", "video"})
    )
    libraries = _library_mounts(discover_driver_files(options, version=VERSION))
    assert {
        f"libEGL_nvidia.so.{VERSION}",
        f"libnvcuvid.so.{VERSION}",
        f"libnvidia-glcore.so.{VERSION}",
    } <= set(libraries)


@pytest.mark.parametrize("layout", list(Layout))
def test_graphics_gives_the_loaders_files_where_the_images_loaders_look_wherever_the_root_keeps_them(
    roots: dict[Layout, Path], layout: Layout
) -> None:
    options = _options(roots[layout], capabilities=frozenset({"graphics"}))
    mounts = {
        m.container_path: m.host_path for m in discover_driver_files(options, version=VERSION).edits.mounts
    }

    icd = mounts["/etc/vulkan/icd.d/nvidia_icd.json"]
    vendor = mounts["/usr/share/glvnd/egl_vendor.d/10_nvidia.json"]
    icd_kept, vendor_kept = {
        Layout.HOST: ("usr/share", "usr/share"),
        Layout.CONTAINERISED: ("etc", "usr/share"),
        Layout.VENDOR_FOLDER: ("share", "share"),
    }[layout]
    assert icd == f"/host-root/{icd_kept}/vulkan/icd.d/nvidia_icd.json"
    assert vendor == f"/host-root/{vendor_kept}/glvnd/egl_vendor.d/10_nvidia.json"
    assert "/etc/OpenCL/vendors/nvidia.icd" not in mounts  # OpenCL is compute


def test_graphics_links_glx_indirect_and_the_gbm_backend(roots: dict[Layout, Path]) -> None:
    options = _options(
        roots[Layout.VENDOR_FOLDER], capabilities=frozenset({"compute", "utility", "graphics"})
    )
    links = discover_driver_files(options, version=VERSION).edits.hooks[0]

    pairs = set(links.args[3::2])
    assert f"libGLX_nvidia.so.{VERSION}::{LIBRARY_FOLDER}/libGLX_indirect.so.0" in pairs
    assert f"../libnvidia-allocator.so.1::{LIBRARY_FOLDER}/gbm/nvidia-drm_gbm.so" in pairs


def test_compute_gives_the_opencl_icd_file_where_the_root_has_one(roots: dict[Layout, Path]) -> None:
    files = discover_driver_files(_options(roots[Layout.HOST]), version=VERSION)

    mounts = {m.container_path: m.host_path for m in files.edits.mounts}
    assert mounts["/etc/OpenCL/vendors/nvidia.icd"] == "/host-root/etc/OpenCL/vendors/nvidia.icd"
    assert (roots[Layout.HOST] / "etc/OpenCL/vendors/nvidia.icd").read_text() == "libnvidia-opencl.so.1\n"
    assert files.supplied == ()  # the root's own file, never one of ours over it


def test_a_root_with_the_opencl_library_but_no_icd_file_is_supplied_one_naming_the_library(
    roots: dict[Layout, Path],
) -> None:
    files = discover_driver_files(_options(roots[Layout.VENDOR_FOLDER]), version=VERSION)

    assert "/etc/OpenCL/vendors/nvidia.icd" not in {m.container_path for m in files.edits.mounts}
    assert files.supplied == (
        SuppliedFile(
            name="OpenCL/vendors/nvidia.icd",
            container_path="/etc/OpenCL/vendors/nvidia.icd",
            content="libnvidia-opencl.so.1\n",  # the library's soname, as NVIDIA's own file says
        ),
    )


def test_no_icd_file_is_supplied_without_compute_or_without_the_opencl_library(
    roots: dict[Layout, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = roots[Layout.VENDOR_FOLDER]
    utility = discover_driver_files(_options(root, capabilities=frozenset({"utility"})), version=VERSION)
    assert utility.supplied == ()

    required, optional = driver_root.LIBRARIES["compute"]
    without = tuple(name for name in optional if name != "libnvidia-opencl")
    monkeypatch.setitem(driver_root.LIBRARIES, "compute", (required, without))
    assert discover_driver_files(_options(root), version=VERSION).supplied == ()


def test_the_vdpau_module_is_found_in_its_own_subfolder_and_mounted_with_the_others(tmp_path: Path) -> None:
    root = build_driver_root(tmp_path / "r", layout=Layout.HOST, version=VERSION)
    (root.library_folder / "vdpau").mkdir()
    (root.library_folder / f"libvdpau_nvidia.so.{VERSION}").rename(
        root.library_folder / "vdpau" / f"libvdpau_nvidia.so.{VERSION}"
    )

    files = discover_driver_files(_options(root.root, capabilities=frozenset({"video"})), version=VERSION)

    assert _library_mounts(files)[f"libvdpau_nvidia.so.{VERSION}"].endswith(
        f"/vdpau/libvdpau_nvidia.so.{VERSION}"
    )


def test_a_library_the_driver_loads_in_turn_comes_along_although_no_capability_names_it(
    roots: dict[Layout, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    compute_required, compute_optional = driver_root.LIBRARIES["compute"]
    without = tuple(name for name in compute_optional if name != "libnvidia-gpucomp")
    monkeypatch.setitem(driver_root.LIBRARIES, "compute", (compute_required, without))

    libraries = _library_mounts(discover_driver_files(_options(roots[Layout.HOST]), version=VERSION))

    assert f"libnvidia-gpucomp.so.{VERSION}" in libraries  # libnvidia-nvvm's DT_NEEDED


def test_a_root_of_another_driver_version_is_refused_naming_both(roots: dict[Layout, Path]) -> None:
    with pytest.raises(DriverFilesError) as failure:
        discover_driver_files(_options(roots[Layout.CONTAINERISED]), version="590.10.01")
    assert failure.value.reason == REASON_VERSION_MISMATCH
    assert VERSION in failure.value.message
    assert "590.10.01" in failure.value.message


def test_a_missing_root_and_a_root_without_libcuda_are_clear_failures(tmp_path: Path) -> None:
    with pytest.raises(DriverFilesError) as missing:
        discover_driver_files(_options(tmp_path / "nothing"), version=VERSION)
    assert missing.value.reason == REASON_ROOT_MISSING
    assert "/host-root" in missing.value.message

    partial = build_driver_root(tmp_path / "partial", layout=Layout.VENDOR_FOLDER, version=VERSION)
    (partial.library_folder / f"libcuda.so.{VERSION}").unlink()
    with pytest.raises(DriverFilesError) as incomplete:
        discover_driver_files(_options(partial.root), version=VERSION)
    assert incomplete.value.reason == REASON_ROOT_INCOMPLETE
    assert f"libcuda.so.{VERSION}" in incomplete.value.message


def test_a_root_without_nvidia_smi_is_incomplete(tmp_path: Path) -> None:
    root = build_driver_root(tmp_path / "r", layout=Layout.VENDOR_FOLDER, version=VERSION)
    (root.binary_folder / "nvidia-smi").unlink()
    with pytest.raises(DriverFilesError, match="lacks nvidia-smi") as failure:
        discover_driver_files(_options(root.root), version=VERSION)
    assert failure.value.reason == REASON_ROOT_INCOMPLETE


def test_without_a_hook_program_no_spec_is_made(roots: dict[Layout, Path]) -> None:
    options = DriverRootOptions(root=roots[Layout.HOST])
    with pytest.raises(DriverFilesError) as failure:
        discover_driver_files(options, version=VERSION)
    assert failure.value.reason == REASON_HOOK_MISSING


def test_a_damaged_library_is_a_failure_naming_it(tmp_path: Path) -> None:
    root = build_driver_root(tmp_path / "r", layout=Layout.VENDOR_FOLDER, version=VERSION)
    damaged = root.library_folder / f"libnvidia-ml.so.{VERSION}"
    damaged.unlink()
    damaged.write_bytes(b"\x7fELF" + b"\x02\x01" + b"\0" * 58)
    with pytest.raises(DriverFilesError, match=str(damaged)):
        discover_driver_files(_options(root.root), version=VERSION)


def test_the_elf_reader_reads_a_real_library_and_refuses_other_files(tmp_path: Path) -> None:
    root = build_driver_root(tmp_path / "r", layout=Layout.VENDOR_FOLDER, version=VERSION)
    info = read_dynamic_info(root.library_folder / f"libnvidia-nvvm.so.{VERSION}")
    assert info.soname == "libnvidia-nvvm.so.4"
    assert info.needed == (f"libnvidia-gpucomp.so.{VERSION}",)
    with pytest.raises(ElfError, match="not an ELF file"):
        read_dynamic_info(root.binary_folder / "nvidia-smi")
    with pytest.raises(ElfError, match="No such file"):
        read_dynamic_info(tmp_path / "absent.so")


def test_the_stand_in_nvidia_smi_prints_the_version(roots: dict[Layout, Path]) -> None:
    smi = roots[Layout.VENDOR_FOLDER] / "bin/nvidia-smi"
    out = subprocess.run([str(smi)], capture_output=True, text=True, check=True).stdout
    assert SMI_OUTPUT.format(version=VERSION) in out


def test_the_base_spec_is_one_the_runtimes_cdi_loader_accepts(
    roots: dict[Layout, Path], tmp_path: Path
) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    files = discover_driver_files(_options(roots[Layout.HOST]), version=VERSION, dev_root=dev)
    specs = CdiSpecs(tmp_path / "cdi")

    device_id = specs.write_driver("nvidia", files)

    path = specs.driver_path("nvidia")
    result = subprocess.run(
        [str(default_bin_dir() / "cdi-validate"), str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(": ", 1)[1].split() == [device_id] == ["k8s.gpu.deckhouse.io/driver=nvidia"]
    spec = json.loads(path.read_text())
    assert spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] == "/dev/nvidiactl"
    assert len(spec["containerEdits"]["hooks"]) == 4
    assert specs.claims() == {}  # start-up's sweep of claim specs never takes the base spec


def test_the_base_spec_is_rewritten_only_when_its_content_changes(
    roots: dict[Layout, Path], tmp_path: Path
) -> None:
    specs = CdiSpecs(tmp_path)
    files = discover_driver_files(_options(roots[Layout.HOST]), version=VERSION)
    specs.write_driver("nvidia", files)
    path = specs.driver_path("nvidia")
    before = path.stat().st_ino
    specs.write_driver("nvidia", files)
    assert path.stat().st_ino == before
    upgraded = build_driver_root(tmp_path / "upgraded", layout=Layout.HOST, version="590.10.01")
    specs.write_driver("nvidia", discover_driver_files(_options(upgraded.root), version="590.10.01"))
    assert path.stat().st_ino != before
    assert "590.10.01" in path.read_text()
    assert VERSION not in path.read_text()


def test_the_backend_finds_the_files_again_only_when_the_driver_version_changes(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    old = build_driver_root(tmp_path / "old", layout=Layout.VENDOR_FOLDER, version=VERSION)
    new = build_driver_root(tmp_path / "new", layout=Layout.VENDOR_FOLDER, version="590.10.01")
    root = tmp_path / "usr-local-nvidia"  # what the driver root shows: the old driver, then the new
    root.symlink_to(old.root)
    nvml = mocker.MagicMock()
    nvml.driver_version.return_value = VERSION
    backend = NvidiaBackend(nvml=nvml, driver_root=_options(root))

    first = backend.driver_files()
    assert backend.driver_files() is first  # unchanged version: no new discovery

    root.unlink()
    root.symlink_to(new.root)
    nvml.driver_version.return_value = "590.10.01"

    upgraded = backend.driver_files()
    assert upgraded.version == "590.10.01"
    assert "libcuda.so.590.10.01" in _library_mounts(upgraded)
