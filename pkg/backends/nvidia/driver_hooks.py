"""The hooks the base spec runs while a container is created: what mounts alone cannot do.

A mount cannot make a symlink or an ld cache entry, and cannot change a file of ``/proc``; NVIDIA's
``nvidia-cdi-hook`` does each of these inside the container's root, on the host, before the
container starts (``createContainer``). The four we run, in the order NVIDIA's own spec runs them
(docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec has the table and what we leave out):

* ``create-symlinks``: each library's soname link (``libcuda.so.1`` → ``libcuda.so.580.159.04``,
  read from its ELF ``DT_SONAME``), its unversioned development name (``libcuda.so``, which some
  programs ``dlopen``) and, with the graphics libraries, the GBM backend
  ``gbm/nvidia-drm_gbm.so`` → ``../libnvidia-allocator.so.1``;
* ``enable-cuda-compat`` (with compute): an image that carries CUDA's forward-compatibility
  libraries (``/usr/local/cuda/compat``) newer than the host's driver gets them first in its ld
  cache; a no-op for every other image;
* ``update-ldcache``: the library folder in the container's ld cache, so the image's loader finds
  ``libcuda.so.1`` and the ICD files' sonames without knowing the driver;
* ``disable-device-node-modification``: the container's view of ``/proc/driver/nvidia/params``
  says ``ModifyDeviceFiles: 0``, so the driver's libraries never try to create the device nodes
  of GPUs the claim was not given; a no-op where the host's driver already says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pkg.backends.driver_files import COMPUTE, GRAPHICS
from pkg.backends.nvidia.driver_libraries import DriverLibrary
from pkg.backends.preparation import Hook

HOOK_NAME: Final = "nvidia-cdi-hook"
GBM_BACKEND: Final = "gbm/nvidia-drm_gbm.so"
_ALLOCATOR: Final = "libnvidia-allocator"
# Names a loader asks for that are not a library's own: GLX's indirect-rendering entry point.
_EXTRA_NAMES: Final = {"libGLX_nvidia": ("libGLX_indirect.so.0",)}


def driver_hooks(
    hook: str, libraries: Iterable[DriverLibrary], *, folder: str, version: str, capabilities: frozenset[str]
) -> list[Hook]:
    """The hooks for ``libraries`` mounted in ``folder`` of the container; ``hook`` is the program."""
    hooks = []
    if links := symlink_args(libraries, folder=folder, graphics=GRAPHICS in capabilities):
        hooks.append(Hook(hook, (HOOK_NAME, "create-symlinks", *links)))
    if COMPUTE in capabilities:
        hooks.append(Hook(hook, (HOOK_NAME, "enable-cuda-compat", f"--host-driver-version={version}")))
    hooks.append(Hook(hook, (HOOK_NAME, "update-ldcache", "--folder", folder)))
    hooks.append(Hook(hook, (HOOK_NAME, "disable-device-node-modification")))
    return hooks


def symlink_args(libraries: Iterable[DriverLibrary], *, folder: str, graphics: bool) -> list[str]:
    """``create-symlinks`` arguments: each soname to its file, each unversioned name to the soname
    (or to the file, for a library whose soname is its file name), GLX's indirect-rendering name
    ``libGLX_indirect.so.0`` and, with graphics, the GBM backend."""
    links = []
    for library in libraries:
        name = library.path.name
        target = name
        if library.soname and library.soname != name:
            links += ["--link", f"{name}::{folder}/{library.soname}"]
            target = library.soname
        if target != f"{library.stem}.so":
            links += ["--link", f"{target}::{folder}/{library.stem}.so"]
        links += [
            arg
            for extra in _EXTRA_NAMES.get(library.stem, ())
            for arg in ("--link", f"{name}::{folder}/{extra}")
        ]
        if graphics and library.stem == _ALLOCATOR:
            links += ["--link", f"../{target}::{folder}/{GBM_BACKEND}"]
    return links
