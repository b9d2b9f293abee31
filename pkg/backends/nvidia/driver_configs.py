"""The driver's configuration files that a loader in the container reads to find the driver.

A graphics or OpenCL program does not load ``libGLX_nvidia.so.0`` by name: a loader that comes
with the image reads a small file naming the driver's library and loads that. Vulkan's loader reads
ICD files (``vulkan/icd.d/nvidia_icd.json``) and implicit layers
(``vulkan/implicit_layer.d/nvidia_layers.json``), libglvnd's EGL reads vendor files
(``glvnd/egl_vendor.d/10_nvidia.json``), ``libEGL_nvidia`` reads its external platforms
(``egl/egl_external_platform.d``), OptiX reads ``nvidia/nvoptix.bin`` and an OpenCL ICD loader
``OpenCL/vendors/nvidia.icd``. The libraries alone give a container none of these APIs
(docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec). The X server's configuration
(``X11/xorg.conf.d``) is left out with its modules: only an X server inside the container would
read it.

Where they are found: the host's configuration folders under the driver root (``etc``,
``usr/local/share``, ``usr/share``), then the driver's own folder (the parent of the folder its
libraries are in: ``/usr/local/nvidia/share``, ``/usr/local/nvidia/etc``) and that folder itself
(a driver installed with ``vulkan/icd.d`` at its top); the first match of each file wins.

Where they go: the folder the image's loader reads by default, whatever folder the host keeps
them in. NVIDIA's toolkit mounts them at their host path, except the Vulkan files, which it puts
under ``/etc``; a host path such as ``/usr/local/nvidia/share/glvnd/...`` is read by no loader in
an image, so we place every file where its loader looks: Vulkan's and OpenCL's under ``/etc``
(read before ``/usr/share``, and never over a file the image ships there), the rest under
``/usr/share``. Every file names its library by soname, which the ld cache the hooks make resolves.

Where the root lacks one: an OpenCL ICD file is one line, the soname of ``libnvidia-opencl``, and
some installs (the H200 node's ``/usr/local/nvidia``) ship the library without it, so OpenCL fails
in a container even through NVIDIA's own spec. Where the library is there and the file is not,
discovery says so (:class:`~pkg.backends.driver_files.SuppliedFile`, with the line) and the plugin
writes the file in a folder of its own and mounts it. The other files carry what only the driver
knows (the Vulkan API version, the layers' entry points), so they are never made up.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.backends.driver_files import COMPUTE, GRAPHICS, SuppliedFile
from pkg.backends.nvidia.driver_libraries import DriverLibrary


@dataclass(frozen=True)
class ConfigFile:
    """A file named ``relative`` below a configuration folder, mounted below ``container_folder``;
    ``library``: the driver library whose soname is the file's one line, so that a root lacking the
    file can be supplied it (None: the file holds more than that, and only the driver has it)."""

    relative: str
    container_folder: str
    library: str | None = None

    @property
    def container_path(self) -> str:
        return f"{self.container_folder}/{self.relative}"


_ETC: Final = "/etc"
_SHARE: Final = "/usr/share"
_VULKAN_ICD_ARCH: Final = {"x86_64": "nvidia_icd.x86_64.json", "aarch64": "nvidia_icd.aarch64.json"}
CONFIG_FILES: Final[dict[str, tuple[ConfigFile, ...]]] = {
    # libnvidia-opencl is a compute library (NVIDIA's split); its ICD file goes with it.
    COMPUTE: (ConfigFile("OpenCL/vendors/nvidia.icd", _ETC, library="libnvidia-opencl"),),
    GRAPHICS: (
        ConfigFile("vulkan/icd.d/nvidia_icd.json", _ETC),
        *(
            (ConfigFile(f"vulkan/icd.d/{_VULKAN_ICD_ARCH[platform.machine()]}", _ETC),)
            if platform.machine() in _VULKAN_ICD_ARCH
            else ()
        ),
        ConfigFile("vulkan/icd.d/nvidia_layers.json", _ETC),
        ConfigFile("vulkan/implicit_layer.d/nvidia_layers.json", _ETC),
        ConfigFile("glvnd/egl_vendor.d/10_nvidia.json", _SHARE),
        ConfigFile("egl/egl_external_platform.d/15_nvidia_gbm.json", _SHARE),
        ConfigFile("egl/egl_external_platform.d/10_nvidia_wayland.json", _SHARE),
        ConfigFile("nvidia/nvoptix.bin", _SHARE),
    ),
}
_HOST_CONFIG_FOLDERS: Final = ("etc", "usr/local/share", "usr/share")
_DRIVER_CONFIG_FOLDERS: Final = ("etc", "share", "")


def config_folders(root: Path, driver_folders: Iterable[Path]) -> list[Path]:
    """Where configuration files are looked for, in order, that exist."""
    candidates = [root / folder for folder in _HOST_CONFIG_FOLDERS]
    candidates += [folder / sub for folder in driver_folders for sub in _DRIVER_CONFIG_FOLDERS]
    folders: list[Path] = []
    for folder in candidates:
        if folder not in folders and folder.is_dir():
            folders.append(folder)
    return folders


def find_config_files(folders: list[Path], capabilities: Iterable[str]) -> list[tuple[Path, ConfigFile]]:
    """Each configuration file of the ``capabilities`` found in ``folders`` (the first match)."""
    found = []
    for capability in sorted(capabilities):
        for config in CONFIG_FILES.get(capability, ()):
            path = next((f / config.relative for f in folders if (f / config.relative).is_file()), None)
            if path is not None:
                found.append((path, config))
    return found


def supplied_config_files(
    found: Iterable[tuple[Path, ConfigFile]], libraries: Iterable[DriverLibrary], capabilities: Iterable[str]
) -> list[SuppliedFile]:
    """The one-line files of the ``capabilities`` that were not ``found`` but whose library was:
    their content is the library's soname (its file name where it has none)."""
    have = {config for _, config in found}
    by_stem = {library.stem: library for library in libraries}
    supplied = []
    for capability in sorted(capabilities):
        for config in CONFIG_FILES.get(capability, ()):
            if config.library is None or config in have or config.library not in by_stem:
                continue
            library = by_stem[config.library]
            supplied.append(
                SuppliedFile(
                    name=config.relative,
                    container_path=config.container_path,
                    content=f"{library.soname or library.path.name}\n",
                )
            )
    return supplied
