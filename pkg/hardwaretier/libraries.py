"""Which shared libraries a program loads, asked of the loader it names, without ``ldd``.

The CUDA program links the CUDA runtime statically (``nvcc -cudart static``), but ``nvcc``'s host
compiler still links glibc and the C++ runtime dynamically: the loader, ``libc``, ``libm``,
``libgcc_s``, ``libstdc++`` and, on older glibc, ``libdl``, ``libpthread`` and ``librt``. The
container's root holds only a static busybox, so these must be copied in — exactly the files the
host's loader resolves, so the program runs there as it runs on the host. ``libcuda.so.1`` is not
among them: the CUDA runtime opens it at run time, and it must come from the CDI specs.

Why not ``ldd``: it is a shell script (not on every host) that only sets
``LD_TRACE_LOADED_OBJECTS`` for the program's loader. We read the loader's path from the program
itself (its ELF ``PT_INTERP`` segment) and ask that loader (``<ld.so> --list PROGRAM``), which is
what resolves the libraries when the program runs; a program without ``PT_INTERP`` is static and
needs nothing.
"""

from __future__ import annotations

import re
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_ELF_MAGIC: Final = b"\x7fELF"
_PT_INTERP: Final = 3
# "\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x…)", "\t/lib64/ld-linux-x86-64.so.2 (0x…)"
_RESOLVED = re.compile(r"^\s*(?P<name>\S+) => (?P<path>/\S+) \(0x[0-9a-f]+\)$")
_DIRECT = re.compile(r"^\s*(?P<path>/\S+) \(0x[0-9a-f]+\)$")
_NOT_FOUND = re.compile(r"^\s*(?P<name>\S+) => not found$")
_VIRTUAL = re.compile(r"^\s*(?P<name>[^/\s]+) \(0x[0-9a-f]+\)$")  # linux-vdso.so.1: the kernel's


class LibraryError(RuntimeError):
    """A program's libraries cannot be determined or resolved; the message names the program."""


@dataclass(frozen=True)
class LoadedFile:
    """One file the loader maps: where the program expects it, and the host file that is there.

    They differ for the loader when it was run by another of its names (``/lib64/ld-linux-x86-64.so.2
    => /usr/bin/ld.so``): the program asks for the first, so the copy must be found there.
    """

    path: Path
    host_file: Path


@dataclass(frozen=True)
class _Layout:
    word: str  # struct format of an address-sized field
    phoff: int  # offset of e_phoff in the ELF header
    phentsize: int  # offset of e_phentsize
    p_offset: int  # offset of p_offset in a program header
    p_filesz: int  # offset of p_filesz


_LAYOUTS: Final = {
    1: _Layout(word="I", phoff=28, phentsize=42, p_offset=4, p_filesz=16),  # ELFCLASS32
    2: _Layout(word="Q", phoff=32, phentsize=54, p_offset=8, p_filesz=32),  # ELFCLASS64
}


def interpreter(program: Path) -> str | None:
    """The loader ``program`` names (its ``PT_INTERP``), or ``None`` for a static program."""
    data = program.read_bytes()
    if data[:4] != _ELF_MAGIC or data[4] not in _LAYOUTS or data[5] not in (1, 2):
        raise LibraryError(f"{program}: not an ELF executable")
    layout = _LAYOUTS[data[4]]
    order = "<" if data[5] == 1 else ">"
    try:
        (phoff,) = struct.unpack_from(order + layout.word, data, layout.phoff)
        phentsize, phnum = struct.unpack_from(order + "HH", data, layout.phentsize)
        for index in range(phnum):
            header = phoff + index * phentsize
            (p_type,) = struct.unpack_from(order + "I", data, header)
            if p_type != _PT_INTERP:
                continue
            (offset,) = struct.unpack_from(order + layout.word, data, header + layout.p_offset)
            (size,) = struct.unpack_from(order + layout.word, data, header + layout.p_filesz)
            return data[offset : offset + size].rstrip(b"\0").decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise LibraryError(f"{program}: truncated or malformed ELF program headers: {exc}") from None
    return None


def parse_loader_list(program: Path, output: str) -> list[LoadedFile]:
    """The files in the loader's ``--list`` output, in its order; a library it could not find is
    a :class:`LibraryError` naming it, and the kernel's virtual library (vDSO) is left out."""
    found: list[LoadedFile] = []
    missing: list[str] = []
    for line in output.splitlines():
        if not line.strip() or _VIRTUAL.match(line):
            continue
        if match := _NOT_FOUND.match(line):
            missing.append(match["name"])
        elif match := _RESOLVED.match(line):
            name, host_file = match["name"], Path(match["path"])
            found.append(
                LoadedFile(path=Path(name) if name.startswith("/") else host_file, host_file=host_file)
            )
        elif match := _DIRECT.match(line):
            found.append(LoadedFile(path=Path(match["path"]), host_file=Path(match["path"])))
        else:
            raise LibraryError(f"{program}: unexpected line from the loader's --list: {line.strip()!r}")
    if missing:
        raise LibraryError(f"{program}: the loader cannot find {', '.join(missing)}")
    return found


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def run_tool(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def shared_libraries(program: Path, *, run: Runner = run_tool) -> list[LoadedFile]:
    """Every file the loader maps for ``program``, the loader itself included; ``[]`` when static."""
    loader = interpreter(program)
    if loader is None:
        return []
    if not Path(loader).is_file():
        raise LibraryError(f"{program}: its loader {loader} is not on this host")
    result = run([loader, "--list", str(program)])
    if result.returncode != 0:
        raise LibraryError(
            f"{program}: {loader} --list failed (exit {result.returncode}): {result.stderr.strip()}"
        )
    return parse_loader_list(program, result.stdout)
