"""The driver's libraries a container needs: found by name and version, closed over ``DT_NEEDED``.

In the root's library folders (:mod:`pkg.hardware.loader_paths`) a library belongs to the driver
when its file name carries the loaded kernel module's version (``libcuda.so.580.159.04``): the
user space must match the kernel module, and a root holding another version is refused, not half
used. The libraries a capability needs come from :data:`LIBRARIES`, NVIDIA's own split of its
libraries by driver capability (the one its container library applies to
``NVIDIA_DRIVER_CAPABILITIES``: OpenCL, the allocator and the PKCS#11 libraries are compute), and
each found library's ``DT_NEEDED`` entries add the driver's libraries it loads in turn
(:mod:`pkg.hardware.elf`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.backends.driver_files import (
    COMPUTE,
    DISPLAY,
    GRAPHICS,
    REASON_ROOT_INCOMPLETE,
    REASON_VERSION_MISMATCH,
    UTILITY,
    VIDEO,
    DriverFilesError,
    DriverRootOptions,
)
from pkg.hardware.elf import ElfError, read_dynamic_info

# NVIDIA's libraries by driver capability; (required, optional) per capability.
LIBRARIES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    COMPUTE: (
        ("libcuda",),
        (
            "libcudadebugger",
            "libnvidia-ptxjitcompiler",
            "libnvidia-nvvm",
            "libnvidia-gpucomp",
            "libnvidia-opencl",
            "libnvidia-allocator",
            "libnvidia-pkcs11",
            "libnvidia-pkcs11-openssl3",
            "libnvidia-tileiras",
        ),
    ),
    UTILITY: (("libnvidia-ml",), ("libnvidia-cfg", "libnvidia-nscq")),
    VIDEO: ((), ("libnvcuvid", "libnvidia-encode", "libnvidia-opticalflow", "libvdpau_nvidia")),
    GRAPHICS: (
        (),
        (
            "libGLX_nvidia",
            "libEGL_nvidia",
            "libGLESv2_nvidia",
            "libGLESv1_CM_nvidia",
            "libnvidia-eglcore",
            "libnvidia-glcore",
            "libnvidia-tls",
            "libnvidia-glsi",
            "libnvidia-fbc",
            "libnvidia-ifr",
            "libnvidia-rtcore",
            "libnvoptix",
            "libnvidia-glvkspirv",
            "libnvidia-cbl",
            "libnvidia-allocator",
            "libnvidia-vulkan-producer",
            "libnvidia-present",
        ),
    ),
    DISPLAY: ((), ("libnvidia-fbc",)),
}
# Folders below a library folder that the driver keeps some libraries in (libvdpau's modules).
_SUBFOLDERS: Final = ("", "vdpau")
_MAX_LIBRARIES: Final = 128


@dataclass(frozen=True)
class DriverLibrary:
    """One library of the driver: its file under the root, its soname (None: it has none) and the
    libraries it loads in turn (``DT_NEEDED``)."""

    path: Path
    soname: str | None
    needed: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        return self.path.name.partition(".so.")[0]

    def needed_stems(self) -> Iterator[str]:
        for name in self.needed:
            stem, dot_so, _ = name.partition(".so")
            if dot_so:
                yield stem


def find_libraries(folders: list[Path], options: DriverRootOptions, version: str) -> list[DriverLibrary]:
    """The libraries the capabilities need, and the driver's libraries they load in turn."""
    by_stem: dict[str, DriverLibrary] = {}
    missing = []
    wanted: list[str] = []
    for capability in sorted(options.capabilities):
        required, optional = LIBRARIES.get(capability, ((), ()))
        for stem in (*required, *optional):
            library = _library(folders, stem, version)
            if library is not None:
                by_stem.setdefault(stem, library)
                wanted.append(stem)
            elif stem in required:
                missing.append(stem)
    if missing:
        raise _incomplete(folders, options, version, missing)
    queue = list(wanted)
    while queue and len(by_stem) < _MAX_LIBRARIES:
        for needed in by_stem[queue.pop()].needed_stems():
            if needed not in by_stem and (found := _library(folders, needed, version)) is not None:
                by_stem[needed] = found
                queue.append(needed)
    return sorted(by_stem.values(), key=lambda lib: lib.path.name)


def driver_folders(root: Path, libraries: Iterable[DriverLibrary]) -> list[Path]:
    """The folders the driver is installed in: the parent of each ``lib64``/``lib`` folder holding
    its libraries (``/usr/local/nvidia`` for ``/usr/local/nvidia/lib64``), where a driver of its
    own keeps its tools (``bin``), firmware and configuration files beside the libraries."""
    folders: list[Path] = []
    for library in libraries:
        folder = library.path.parent
        if folder.name == "vdpau":
            folder = folder.parent
        parent = folder.parent
        if folder.name in ("lib64", "lib") and parent.is_relative_to(root) and parent not in folders:
            folders.append(parent)
    return folders


def _library(folders: list[Path], stem: str, version: str) -> DriverLibrary | None:
    for folder in folders:
        for sub in _SUBFOLDERS:
            path = folder / sub / f"{stem}.so.{version}"
            if path.is_file():
                try:
                    info = read_dynamic_info(path)
                except ElfError as exc:
                    raise DriverFilesError(reason=REASON_ROOT_INCOMPLETE, message=str(exc)) from exc
                return DriverLibrary(path=path, soname=info.soname, needed=info.needed)
    return None


def _incomplete(
    folders: list[Path], options: DriverRootOptions, version: str, missing: list[str]
) -> DriverFilesError:
    """Why the required libraries are missing: another driver version in the root, or none."""
    other = re.compile(rf"^{re.escape(missing[0])}\.so\.(\d+\.\d+(?:\.\d+)?)$")
    for folder in folders:
        for entry in _names(folder):
            if (match := other.match(entry)) and match[1] != version:
                return DriverFilesError(
                    reason=REASON_VERSION_MISMATCH,
                    message=f"driver root {options.host_root} holds {entry} (driver {match[1]}), but the "
                    f"loaded kernel module is {version}",
                )
    searched = ", ".join(options.on_host(folder) for folder in folders) or "no library folder"
    return DriverFilesError(
        reason=REASON_ROOT_INCOMPLETE,
        message=f"driver root {options.host_root} lacks {', '.join(f'{m}.so.{version}' for m in missing)} "
        f"(searched {searched})",
    )


def _names(folder: Path) -> list[str]:
    try:
        return [entry.name for entry in folder.iterdir()]
    except OSError:
        return []
