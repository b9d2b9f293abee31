"""Finds the NVIDIA driver's user space under a driver root and turns it into container edits.

Discovery, not a list of paths per distribution: the library folders are the ones the root's own
dynamic loader would search (its ``etc/ld.so.conf`` and the includes it names, then glibc's
built-in folders for this machine, then the root's own ``lib64``/``lib``, which is where a driver
installed into a folder of its own keeps them). Which libraries, and how they are told apart from
other files there: :mod:`.driver_libraries`. A driver installed into a folder of its own
(``/usr/local/nvidia``) keeps its tools, firmware and configuration files beside its libraries,
so that folder is searched too, whatever the root (:func:`~.driver_libraries.driver_folders`).

What a container gets (docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec):

* every library, read-only, in one folder of its own, :data:`LIBRARY_FOLDER` (the folder CUDA
  images already search), never over an image's own files;
* the configuration files through which the image's loaders find the driver (Vulkan ICD and
  layers, EGL vendor and platforms, OpenCL ICD: :mod:`.driver_configs`), and the one-line OpenCL
  ICD file where the root has the library but not the file, for the plugin to write
  (:class:`~pkg.backends.driver_files.SuppliedFile`);
* the hooks that make the soname links and the ld cache (:mod:`.driver_hooks`);
* the tools (``nvidia-smi``, the MPS control daemon and server, ...) in ``/usr/bin``; the GSP
  firmware at ``/lib/firmware/nvidia/<version>``; the sockets of ``nvidia-persistenced`` and the
  fabric manager where they run; the control device nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pkg.backends.driver_files import (
    COMPUTE,
    REASON_HOOK_MISSING,
    REASON_ROOT_INCOMPLETE,
    REASON_ROOT_MISSING,
    UTILITY,
    DriverFiles,
    DriverFilesError,
    DriverRootOptions,
)
from pkg.backends.nvidia.driver_configs import config_folders, find_config_files, supplied_config_files
from pkg.backends.nvidia.driver_hooks import HOOK_NAME, driver_hooks
from pkg.backends.nvidia.driver_libraries import LIBRARIES, DriverLibrary, driver_folders, find_libraries
from pkg.backends.preparation import READ_ONLY, ContainerEdits, DeviceNode, Mount
from pkg.hardware.loader_paths import library_folders

__all__ = ["LIBRARIES", "LIBRARY_FOLDER", "DriverLibrary", "discover_driver_files", "find_libraries"]

LIBRARY_FOLDER: Final = "/usr/local/nvidia/lib64"
BINARY_FOLDER: Final = "/usr/bin"
FIRMWARE_FOLDER: Final = "/lib/firmware/nvidia"
BINARIES: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    UTILITY: (("nvidia-smi",), ("nvidia-debugdump", "nvidia-persistenced")),
    COMPUTE: ((), ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")),
}
SOCKETS: Final = ("nvidia-persistenced/socket", "nvidia-fabricmanager/socket")
REQUIRED_CONTROL_NODES: Final = ("nvidiactl",)
OPTIONAL_CONTROL_NODES: Final = ("nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
_BINARY_FOLDERS: Final = ("usr/bin", "bin", "usr/local/bin", "usr/sbin", "sbin")
_FIRMWARE_FOLDERS: Final = ("lib/firmware/nvidia", "usr/lib/firmware/nvidia", "firmware/nvidia")


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
    libraries = find_libraries(library_folders(root), options, version)
    own = driver_folders(root, libraries)
    binaries = _find_binaries(root, own, options)
    firmware = _find_firmware([root, *own], version)
    configs = find_config_files(config_folders(root, own), options.capabilities)
    supplied = supplied_config_files(configs, libraries, options.capabilities)
    sockets = [options.host_run / socket for socket in SOCKETS if (options.host_run / socket).is_socket()]
    mounts = [
        Mount(options.on_host(lib.path), f"{LIBRARY_FOLDER}/{lib.path.name}", READ_ONLY) for lib in libraries
    ]
    mounts += [Mount(options.on_host(path), config.container_path, READ_ONLY) for path, config in configs]
    mounts += [Mount(options.on_host(path), f"{BINARY_FOLDER}/{path.name}", READ_ONLY) for path in binaries]
    mounts += [
        Mount(options.on_host(path), f"{FIRMWARE_FOLDER}/{version}/{path.name}", READ_ONLY)
        for path in firmware
    ]
    mounts += [
        Mount(options.on_host(path), f"/run/{path.relative_to(options.host_run)}", READ_ONLY)
        for path in sockets
    ]
    hooks = driver_hooks(
        str(options.cdi_hook),
        libraries,
        folder=LIBRARY_FOLDER,
        version=version,
        capabilities=options.capabilities,
    )
    return DriverFiles(
        version=version,
        edits=ContainerEdits(device_nodes=_control_nodes(dev_root), mounts=tuple(mounts), hooks=tuple(hooks)),
        found={
            "libraries": len(libraries),
            "configs": len(configs),
            "binaries": len(binaries),
            "firmware": len(firmware),
            "sockets": len(sockets),
            **({"supplied": len(supplied)} if supplied else {}),
        },
        supplied=tuple(supplied),
    )


def _find_binaries(root: Path, own: list[Path], options: DriverRootOptions) -> list[Path]:
    folders = [root / f for f in _BINARY_FOLDERS] + [folder / "bin" for folder in own]
    found, missing = [], []
    for capability in sorted(options.capabilities):
        required, optional = BINARIES.get(capability, ((), ()))
        for name in (*required, *optional):
            path = next((f / name for f in folders if (f / name).is_file()), None)
            if path is not None:
                found.append(path)
            elif name in required:
                missing.append(name)
    if missing:
        searched = ", ".join(options.on_host(f) for f in folders)
        raise DriverFilesError(
            reason=REASON_ROOT_INCOMPLETE,
            message=f"driver root {options.host_root} lacks {', '.join(missing)} (searched {searched})",
        )
    return found


def _find_firmware(bases: list[Path], version: str) -> list[Path]:
    """GSP firmware of ``version`` in the first folder that has some (the root's firmware folders,
    then the driver's own ``firmware/nvidia``); none is not an error: cards without GSP need none."""
    for base in bases:
        for folder in _FIRMWARE_FOLDERS:
            files = sorted(p for p in (base / folder / version).glob("gsp*.bin") if p.is_file())
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
