"""Stand-in NVIDIA driver installations: the driver's user space, laid out as real installs are.

Tests and the demo have no NVIDIA driver, yet what gpu-handler puts into a container is found by
reading a driver root (:mod:`pkg.backends.nvidia.driver_root`). These roots are built to be read
the same way: files named as the driver names them (``libcuda.so.<version>`` with soname
``libcuda.so.1``, ``libnvidia-nvvm.so.<version>`` with soname ``libnvidia-nvvm.so.4``, the
unversioned and soname links a real install has), as real shared objects (compiled here with the
machine's C compiler, so the dynamic loader and ``ldconfig`` in a container treat them as they
treat the driver's), a stand-in ``nvidia-smi`` that prints the version, and GSP firmware files.
The names and sonames are those of driver 580 on a real H200 node.

Three layouts (:class:`Layout`), each a place drivers are really installed:

* ``HOST``: a distribution's packages on the host root (``usr/lib/<multiarch>``, an
  ``etc/ld.so.conf.d`` entry, ``usr/bin``, ``lib/firmware/nvidia/<version>``);
* ``CONTAINERISED``: a driver container's root mounted on the host (``/run/nvidia/driver``),
  RHEL-like (``usr/lib64``, ``usr/lib/firmware``);
* ``VENDOR_FOLDER``: everything in one folder of its own (``/usr/local/nvidia``: ``lib64`` with a
  ``lib`` link to it, ``bin``, ``firmware/nvidia/<version>`` beside the libraries, ``share/vulkan``
  and ``share/glvnd``), as on the H200 node.

Each layout also has the configuration files through which loaders find the driver, with the
content driver 580 ships (the Vulkan ICD and layers files, the EGL vendor file), where that kind of
install keeps them; the host layout has the OpenCL ICD file, which the H200 node lacks.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

# (stem, soname suffix: "" for a soname that is the versioned file name itself) of driver 580.
LIBRARIES: Final = (
    ("libcuda", "1"),
    ("libcudadebugger", "1"),
    ("libnvidia-ml", "1"),
    ("libnvidia-cfg", "1"),
    ("libnvidia-ptxjitcompiler", "1"),
    ("libnvidia-gpucomp", ""),
    ("libnvidia-nvvm", "4"),
    ("libnvidia-allocator", "1"),
    ("libnvidia-opencl", "1"),
    ("libnvcuvid", "1"),
    ("libnvidia-encode", "1"),
    ("libnvidia-opticalflow", "1"),
    ("libEGL_nvidia", "0"),
    ("libGLX_nvidia", "0"),
    ("libGLESv2_nvidia", "2"),
    ("libGLESv1_CM_nvidia", "1"),
    ("libnvidia-eglcore", ""),
    ("libnvidia-glcore", ""),
    ("libnvidia-tls", ""),
    ("libnvidia-glsi", ""),
    ("libnvidia-fbc", "1"),
    ("libnvidia-rtcore", ""),
    ("libnvoptix", "1"),
    ("libnvidia-glvkspirv", ""),
    ("libnvidia-pkcs11-openssl3", ""),
    ("libvdpau_nvidia", "1"),
)
# A dependency between the stand-ins, so that discovery's DT_NEEDED closure has one to follow.
NEEDED: Final = {"libnvidia-nvvm": ("libnvidia-gpucomp",)}
BINARIES: Final = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)
FIRMWARE: Final = ("gsp_ga10x.bin", "gsp_tu10x.bin")
SMI_OUTPUT: Final = "NVIDIA-SMI stand-in, driver {version}"
# The configuration files driver 580 ships, with their content ({version}: the driver's).
VULKAN_ICD: Final = """{{
    "file_format_version" : "1.0.1",
    "ICD": {{
        "library_path": "libGLX_nvidia.so.0",
        "api_version" : "1.4.312"
    }}
}}
"""
VULKAN_LAYERS: Final = """{{
    "file_format_version" : "1.0.1",
    "layers": [{{
        "name": "VK_LAYER_NV_optimus",
        "type": "INSTANCE",
        "library_path": "libGLX_nvidia.so.0",
        "api_version" : "1.4.312",
        "implementation_version" : "1",
        "description" : "NVIDIA Optimus layer",
        "functions": {{
            "vkGetInstanceProcAddr": "vk_optimusGetInstanceProcAddr",
            "vkGetDeviceProcAddr": "vk_optimusGetDeviceProcAddr"
        }},
        "enable_environment": {{
            "__NV_PRIME_RENDER_OFFLOAD": "1"
        }},
        "disable_environment": {{
            "DISABLE_LAYER_NV_OPTIMUS_1": ""
        }}
    }},{{
        "name": "VK_LAYER_NV_present",
        "type": "INSTANCE",
        "library_path": "libnvidia-present.so.{version}",
        "api_version" : "1.4.312",
        "implementation_version" : "1",
        "description" : "NVIDIA GR2608 layer",
        "functions": {{
            "vkGetInstanceProcAddr": "vk_nvpGetInstanceProcAddr",
            "vkGetDeviceProcAddr": "vk_nvpGetDeviceProcAddr"
        }},
        "enable_environment": {{
            "NVPRESENT_ENABLE_SMOOTH_MOTION": "1"
        }},
        "disable_environment": {{
            "DISABLE_LAYER_NV_GR2608_1": ""
        }}
    }}]
}}
"""
EGL_VENDOR: Final = """{{
    "file_format_version" : "1.0.0",
    "ICD" : {{
        "library_path" : "libEGL_nvidia.so.0"
    }}
}}
"""
OPENCL_ICD: Final = "libnvidia-opencl.so.1\n"
# Where each layout keeps them: (folder below the root, file name, content).
_VULKAN_AND_EGL: Final = (
    ("vulkan/icd.d", "nvidia_icd.json", VULKAN_ICD),
    ("vulkan/implicit_layer.d", "nvidia_layers.json", VULKAN_LAYERS),
    ("glvnd/egl_vendor.d", "10_nvidia.json", EGL_VENDOR),
)
CONFIG_FILES: Final = {
    "host": (
        *((f"usr/share/{folder}", name, content) for folder, name, content in _VULKAN_AND_EGL),
        ("etc/OpenCL/vendors", "nvidia.icd", OPENCL_ICD),
    ),
    "containerised": (
        ("etc/vulkan/icd.d", "nvidia_icd.json", VULKAN_ICD),
        ("usr/share/glvnd/egl_vendor.d", "10_nvidia.json", EGL_VENDOR),
        ("etc/OpenCL/vendors", "nvidia.icd", OPENCL_ICD),
    ),
    "vendor-folder": tuple((f"share/{folder}", name, content) for folder, name, content in _VULKAN_AND_EGL),
}
_GENERATION: Final = 2  # the stand-in's make-up: a root built by an older one is built again


class Layout(StrEnum):
    HOST = "host"
    CONTAINERISED = "containerised"
    VENDOR_FOLDER = "vendor-folder"


@dataclass(frozen=True)
class DriverRoot:
    """A built stand-in: ``root`` (what gpu-handler's ``--driver-root`` names) and its folders."""

    root: Path
    version: str
    library_folder: Path
    binary_folder: Path
    firmware_folder: Path


def build_driver_root(target: Path, *, layout: Layout, version: str, cc: str = "cc") -> DriverRoot:
    """Builds the stand-in driver of ``version`` under ``target`` (created; reused if complete)."""
    multiarch = f"{platform.machine()}-linux-gnu"
    folders = {
        Layout.HOST: (f"usr/lib/{multiarch}", "usr/bin", f"lib/firmware/nvidia/{version}"),
        Layout.CONTAINERISED: ("usr/lib64", "usr/bin", f"usr/lib/firmware/nvidia/{version}"),
        Layout.VENDOR_FOLDER: ("lib64", "bin", f"firmware/nvidia/{version}"),
    }[layout]
    built = DriverRoot(target, version, *(target / folder for folder in folders))
    stamp = target / ".complete"
    if stamp.is_file() and stamp.read_text() == f"{layout} {version} {_GENERATION}\n":
        return built
    for folder in (built.library_folder, built.binary_folder, built.firmware_folder):
        folder.mkdir(parents=True, exist_ok=True)
    _build_libraries(built.library_folder, version, cc)
    for name in BINARIES:
        _write_tool(
            built.binary_folder / name, SMI_OUTPUT.format(version=version) if name == "nvidia-smi" else name
        )
    for name in FIRMWARE:
        (built.firmware_folder / name).write_bytes(b"stand-in GSP firmware\n")
    if layout is not Layout.VENDOR_FOLDER:  # a vendor folder is found through its own lib64
        conf = target / "etc/ld.so.conf.d"
        conf.mkdir(parents=True, exist_ok=True)
        (target / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
        (conf / f"{multiarch}.conf").write_text(f"/{folders[0]}\n")
    for config_folder, name, content in CONFIG_FILES[layout]:
        (target / config_folder).mkdir(parents=True, exist_ok=True)
        (target / config_folder / name).write_text(content.format(version=version))
    if layout is Layout.VENDOR_FOLDER:  # the H200 node's lib -> lib64
        _link(target / "lib", "lib64")
    stamp.write_text(f"{layout} {version} {_GENERATION}\n")
    return built


def upgrade_driver_root(current: DriverRoot, *, layout: Layout, version: str, cc: str = "cc") -> DriverRoot:
    """Replaces the driver of ``current`` by ``version`` in place, as a package upgrade does: the
    new version's files are written beside the old ones, the soname and unversioned links move to
    them, then every file and folder named for the old version goes. A reader of the root at any
    moment finds a complete driver (the old or the new); containers that mounted old files keep
    them (a bind mount holds the file, not its name)."""
    upgraded = build_driver_root(current.root, layout=layout, version=version, cc=cc)
    if current.version != version:
        for path in sorted(
            current.root.rglob(f"*{current.version}*"), key=lambda p: len(p.parts), reverse=True
        ):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    return upgraded


def _build_libraries(folder: Path, version: str, cc: str) -> None:
    for stem, suffix in sorted(LIBRARIES, key=lambda item: item[0] in NEEDED):  # dependencies first
        name = f"{stem}.so.{version}"
        soname = f"{stem}.so.{suffix}" if suffix else name
        needed = [folder / f"{dependency}.so.{version}" for dependency in NEEDED.get(stem, ())]
        build_library(folder / name, soname=soname, needed=needed, cc=cc)
        _link(folder / soname, name)
        _link(folder / f"{stem}.so", soname)


def build_library(path: Path, *, soname: str, needed: list[Path] | None = None, cc: str = "cc") -> None:
    """Compiles a stand-in shared object at ``path`` with ``soname`` that loads ``needed``
    (``DT_NEEDED`` by their file names), so that readers of ELF files treat it as the real one."""
    compiler = shutil.which(cc)
    if compiler is None:
        raise FileNotFoundError(
            f"no C compiler '{cc}': the stand-in driver libraries are compiled (README: requirements)"
        )
    stem = path.name.partition(".so")[0]
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "stand_in.c"
        source.write_text(f"int gpucp_stand_in_{stem.replace('-', '_')}(void) {{ return 0; }}\n")
        subprocess.run(
            [
                compiler,
                "-shared",
                "-fPIC",
                "-nostdlib",
                f"-Wl,-soname,{soname}",
                "-Wl,--no-as-needed",
                "-o",
                str(path),
                str(source),
                *(arg for lib in needed or () for arg in (f"-L{lib.parent}", f"-l:{lib.name}")),
            ],
            check=True,
            capture_output=True,
        )


def _link(link: Path, target: str) -> None:
    if link.name == target:
        return
    link.unlink(missing_ok=True)
    link.symlink_to(target)


def _write_tool(path: Path, output: str) -> None:
    path.write_text(
        f'#!/bin/sh\necho "{output}"\necho "visible devices: ${{NVIDIA_VISIBLE_DEVICES:-none}}"\n'
    )
    os.chmod(path, 0o755)
