"""Finds the NVIDIA driver's user space under a driver root and turns it into container edits.

Discovery, not a list of paths per distribution: the library folders are the ones the root's own
dynamic loader would search (its ``etc/ld.so.conf`` and the includes it names, then glibc's
built-in folders for this machine, then the root's own ``lib64``/``lib``, which is where a driver
installed into a folder of its own keeps them). In those folders a library belongs to the driver
when its file name carries the loaded kernel module's version (``libcuda.so.580.159.04``): the
user space must match the kernel module, and a root holding another version is refused, not half
used. The libraries a capability needs come from a table of names (NVIDIA's own split of its
libraries by driver capability), and each found library's ``DT_NEEDED`` entries add the driver's
libraries it loads in turn (:mod:`pkg.hardware.elf`).

What a container gets (docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec):

* every library, read-only, in one folder of its own, :data:`LIBRARY_FOLDER` (the folder CUDA
  images already search), never over an image's own files;
* the soname links (``libcuda.so.1`` → ``libcuda.so.580.159.04``, and ``libcuda.so``) and that
  folder in the container's ld cache, made by NVIDIA's ``nvidia-cdi-hook`` (``create-symlinks``,
  ``update-ldcache``) while the container is created, so an image whose own ld cache knows
  nothing of the driver still loads ``libcuda.so.1`` the way every CUDA program does;
* the tools (``nvidia-smi``, the MPS control daemon and server, ...) in ``/usr/bin``; the GSP
  firmware at the path the driver reads it from; the sockets of ``nvidia-persistenced`` and the
  fabric manager where they run; the control device nodes.
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
    REASON_HOOK_MISSING,
    REASON_ROOT_INCOMPLETE,
    REASON_ROOT_MISSING,
    REASON_VERSION_MISMATCH,
    UTILITY,
    VIDEO,
    DriverFiles,
    DriverFilesError,
    DriverRootOptions,
)
from pkg.backends.preparation import READ_ONLY, ContainerEdits, DeviceNode, Hook, Mount
from pkg.hardware.elf import ElfError, read_dynamic_info
from pkg.hardware.loader_paths import library_folders

LIBRARY_FOLDER: Final = "/usr/local/nvidia/lib64"
BINARY_FOLDER: Final = "/usr/bin"
HOOK_NAME: Final = "nvidia-cdi-hook"
# NVIDIA's libraries by driver capability; (required, optional) per capability.
LIBRARIES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    COMPUTE: (
        ("libcuda",),
        ("libcudadebugger", "libnvidia-ptxjitcompiler", "libnvidia-nvvm", "libnvidia-gpucomp"),
    ),
    UTILITY: (("libnvidia-ml",), ("libnvidia-cfg",)),
    VIDEO: ((), ("libnvcuvid", "libnvidia-encode", "libnvidia-opticalflow")),
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
            "libnvidia-rtcore",
            "libnvoptix",
            "libnvidia-glvkspirv",
            "libnvidia-allocator",
        ),
    ),
    DISPLAY: ((), ("libnvidia-fbc",)),
}
BINARIES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    UTILITY: (("nvidia-smi",), ("nvidia-debugdump", "nvidia-persistenced")),
    COMPUTE: ((), ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")),
}
DEV_LINKS: Final = ("libcuda",)  # programs that dlopen the unversioned name: libcuda.so
SOCKETS: Final = ("nvidia-persistenced/socket", "nvidia-fabricmanager/socket")
REQUIRED_CONTROL_NODES: Final = ("nvidiactl",)
OPTIONAL_CONTROL_NODES: Final = ("nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
_BINARY_FOLDERS: Final = ("usr/bin", "bin", "usr/local/bin", "usr/sbin", "sbin")
_FIRMWARE_FOLDERS: Final = ("lib/firmware/nvidia", "usr/lib/firmware/nvidia", "firmware/nvidia")
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


def discover_driver_files(
    options: DriverRootOptions, *, version: str, dev_root: Path = Path("/dev")
) -> DriverFiles:
    """The driver's user space of ``version`` under ``options.root``; :class:`DriverFilesError`."""
    root = options.root
    if not root.is_dir():
        raise DriverFilesError(
            reason=REASON_ROOT_MISSING, message=f"driver root {options.host_root} does not exist"
        )
    if options.cdi_hook is None:
        raise DriverFilesError(
            reason=REASON_HOOK_MISSING,
            message=f"no {HOOK_NAME} is installed on the host: containers would get no soname links "
            "or ld cache",
        )
    folders = library_folders(root)
    libraries = find_libraries(folders, options, version)
    binaries = _find_binaries(root, options)
    firmware = _find_firmware(root, version)
    sockets = [options.host_run / socket for socket in SOCKETS if (options.host_run / socket).is_socket()]
    mounts = [
        Mount(options.on_host(lib.path), f"{LIBRARY_FOLDER}/{lib.path.name}", READ_ONLY) for lib in libraries
    ]
    mounts += [Mount(options.on_host(path), f"{BINARY_FOLDER}/{path.name}", READ_ONLY) for path in binaries]
    mounts += [
        Mount(options.on_host(path), f"/lib/firmware/nvidia/{version}/{path.name}", READ_ONLY)
        for path in firmware
    ]
    mounts += [
        Mount(options.on_host(path), f"/run/{path.relative_to(options.host_run)}", READ_ONLY)
        for path in sockets
    ]
    hook = str(options.cdi_hook)
    hooks = [Hook(hook, (HOOK_NAME, "update-ldcache", "--folder", LIBRARY_FOLDER))]
    if links := _links(libraries):
        hooks.insert(0, Hook(hook, (HOOK_NAME, "create-symlinks", *links)))
    return DriverFiles(
        version=version,
        edits=ContainerEdits(device_nodes=_control_nodes(dev_root), mounts=tuple(mounts), hooks=tuple(hooks)),
        found={
            "libraries": len(libraries),
            "binaries": len(binaries),
            "firmware": len(firmware),
            "sockets": len(sockets),
        },
    )


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


def _library(folders: list[Path], stem: str, version: str) -> DriverLibrary | None:
    for folder in folders:
        path = folder / f"{stem}.so.{version}"
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


def _find_binaries(root: Path, options: DriverRootOptions) -> list[Path]:
    found, missing = [], []
    for capability in sorted(options.capabilities):
        required, optional = BINARIES.get(capability, ((), ()))
        for name in (*required, *optional):
            path = next((root / f / name for f in _BINARY_FOLDERS if (root / f / name).is_file()), None)
            if path is not None:
                found.append(path)
            elif name in required:
                missing.append(name)
    if missing:
        raise DriverFilesError(
            reason=REASON_ROOT_INCOMPLETE,
            message=f"driver root {options.host_root} lacks {', '.join(missing)} "
            f"(searched {', '.join(_BINARY_FOLDERS)})",
        )
    return found


def _find_firmware(root: Path, version: str) -> list[Path]:
    """GSP firmware of ``version`` (none for cards that run without GSP: not an error)."""
    for folder in _FIRMWARE_FOLDERS:
        files = sorted(p for p in (root / folder / version).glob("gsp*.bin") if p.is_file())
        if files:
            return files
    return []


def _control_nodes(dev_root: Path) -> tuple[DeviceNode, ...]:
    nodes = [
        DeviceNode(path=f"/dev/{name}", host_path=str(dev_root / name)) for name in REQUIRED_CONTROL_NODES
    ]
    nodes += [
        DeviceNode(path=f"/dev/{name}", host_path=str(dev_root / name))
        for name in OPTIONAL_CONTROL_NODES
        if (dev_root / name).exists()
    ]
    return tuple(nodes)


def _links(libraries: Iterable[DriverLibrary]) -> list[str]:
    """``create-symlinks`` arguments: each soname to its file, and the unversioned names."""
    links = []
    for library in libraries:
        if library.soname and library.soname != library.path.name:
            links += ["--link", f"{library.path.name}::{LIBRARY_FOLDER}/{library.soname}"]
            if library.stem in DEV_LINKS:
                links += ["--link", f"{library.soname}::{LIBRARY_FOLDER}/{library.stem}.so"]
    return links


def _names(folder: Path) -> list[str]:
    try:
        return [entry.name for entry in folder.iterdir()]
    except OSError:
        return []
