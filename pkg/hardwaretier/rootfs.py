"""The container's root: busybox, one program and the glibc files it loads — nothing of NVIDIA's.

The point of the CUDA step is that a container gets the GPU *only* through our CDI specs: the
driver's libraries, device nodes and hooks must all come from what the CDI library applies. So
the root is built from parts whose origin is known: Debian's ``busybox-static`` (one static
executable: a shell for looking around when a run fails), the program, and the files the host's
loader maps for it (:mod:`.libraries`: glibc and the C++ runtime, which the CUDA program links
dynamically even with the CUDA runtime static). Each file lands at the path the program asks
for, so the loader's default search path finds it without an ``ld.so.cache``. Beside libc go the
rest of glibc's run-time libraries (:data:`GLIBC_LIBRARIES`): any glibc-based image has them, and
the driver's own libraries need them — ``libcuda.so.1`` links ``libdl.so.2``, ``libpthread.so.0``
and ``librt.so.1``, which a program built against glibc 2.34 or later never loads itself, so a
root of only the program's files fails every CUDA call with ``cudaErrorInsufficientDriver``
(seen on an H100) although the base spec gave it the driver.

:func:`nvidia_files` is the guard: a root holding anything that looks like the driver's user
space (``libcuda``, ``libnvidia-*``, ``nvidia-*`` tools, the graphics libraries ``lib*_nvidia``
such as ``libGLX_nvidia``, and the loaders' files that point at them: ``nvidia_icd.json``,
``10_nvidia.json``, ``nvidia.icd``) is refused, because a program that ran there would prove
nothing about our specs.

``extra_roots`` are folders whose content is copied into the root as it is (links kept): the
graphics checks put the loaders' Debian packages there (:mod:`.loader_packages`), which the
guard checks like everything else.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.hardwaretier.libraries import Runner, interpreter, run_tool, shared_libraries

BUSYBOX: Final = Path("/bin/busybox")
PROGRAM_DIR: Final = Path("/usr/local/bin")
# The driver's user space as NVIDIA's own CDI generator lists it: its libraries (libGLX_nvidia,
# libEGL_nvidia, libvdpau_nvidia, ... among them), its tools (nvidia-smi) and the loaders' files
# that name them (nvidia_icd.json, nvidia.icd, 10_nvidia.json, 15_nvidia_gbm.json).
_NVIDIA_FILE = re.compile(
    r"^(lib(cuda|nvidia-|nvcuvid|nvoptix|cudadebugger|nvrm)|lib\w+_nvidia|nvidia|\d+_nvidia)", re.IGNORECASE
)
# glibc's run-time libraries, as Debian's libc6 ships them; copied when the host has them.
GLIBC_LIBRARIES: Final = (
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libresolv.so.2",
    "libutil.so.1",
    "libanl.so.1",
)
_FOLDERS: Final = ("bin", "dev", "etc", "proc", "sys", "tmp", "usr/local/bin")


class RootfsError(RuntimeError):
    """The root cannot be built as required; the message names the file."""


@dataclass(frozen=True)
class Rootfs:
    """A built root: its folder, the program's path inside it, and what else was copied in."""

    path: Path
    program: str
    libraries: tuple[str, ...]


def build_rootfs(
    target: Path,
    *,
    program: Path,
    extra_roots: Sequence[Path] = (),
    busybox: Path = BUSYBOX,
    run: Runner = run_tool,
) -> Rootfs:
    """Builds the root in ``target`` (created; must not exist) for ``program``, with the content
    of each of ``extra_roots`` copied in."""
    if not busybox.is_file():
        raise RootfsError(f"{busybox} is missing: install Debian's busybox-static")
    if interpreter(busybox) is not None:
        raise RootfsError(f"{busybox} is dynamically linked: install Debian's busybox-static")
    target.mkdir(parents=True)
    for folder in _FOLDERS:
        (target / folder).mkdir(parents=True, exist_ok=True)
    (target / "tmp").chmod(0o1777)
    shutil.copyfile(busybox, target / "bin" / "busybox")
    (target / "bin" / "busybox").chmod(0o755)
    (target / "bin" / "sh").symlink_to("busybox")

    inside = PROGRAM_DIR / program.name
    _copy(program, target, inside)
    libraries = []
    for loaded in shared_libraries(program, run=run):
        if _NVIDIA_FILE.match(loaded.path.name):
            raise RootfsError(
                f"{program} links the NVIDIA driver's {loaded.path}; it must come from the CDI specs"
            )
        _copy(loaded.host_file, target, loaded.path)
        libraries.append(str(loaded.path))
        if loaded.path.name == "libc.so.6":
            libraries.extend(_copy_glibc(loaded.host_file.parent, target, loaded.path.parent, libraries))
    for extra in extra_roots:
        if not extra.is_dir():
            raise RootfsError(f"{extra}: a folder to copy into the root must exist")
        shutil.copytree(extra, target, symlinks=True, dirs_exist_ok=True)
    found = nvidia_files(target)
    if found:
        raise RootfsError(f"{target} holds files of the NVIDIA driver: {', '.join(found)}")
    return Rootfs(path=target, program=str(inside), libraries=tuple(libraries))


def _copy_glibc(host_folder: Path, root: Path, inside: Path, copied: list[str]) -> list[str]:
    """Copies the glibc libraries of :data:`GLIBC_LIBRARIES` found in ``host_folder`` (beside the
    host's libc) into ``inside`` the root, skipping those already copied; returns their paths."""
    added = []
    for name in GLIBC_LIBRARIES:
        path = inside / name
        if str(path) in copied or not (host_folder / name).is_file():
            continue
        _copy(host_folder / name, root, path)
        added.append(str(path))
    return added


def nvidia_files(root: Path) -> list[str]:
    """Files under ``root`` named like the NVIDIA driver's libraries or tools, as container paths."""
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if _NVIDIA_FILE.match(name):
                found.append("/" + str((Path(folder) / name).relative_to(root)))
    return sorted(found)


def _copy(host_file: Path, root: Path, inside: Path) -> None:
    """Copies the content (links followed) of ``host_file`` to ``inside`` the root, executable
    bits kept, so the root holds real files and no link that points back into the host."""
    if not inside.is_absolute():
        raise RootfsError(f"{inside}: a path in the container must be absolute")
    destination = root / inside.relative_to("/")
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(host_file, destination)
        shutil.copymode(host_file, destination)
    except OSError as exc:
        raise RootfsError(f"cannot copy {host_file} into the container at {inside}: {exc}") from exc
