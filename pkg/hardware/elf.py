"""What the dynamic loader reads from a shared library: its soname and the libraries it needs.

The driver's user space is found by reading its files, not from a list of names per driver
release: a library's ``DT_SONAME`` is the name programs load it by (``libcuda.so.1``, which a
container needs as a link to the versioned file), and its ``DT_NEEDED`` entries are the libraries
it loads in turn (the driver's own dependencies go into the container with it). Only 64-bit
little-endian ELF files are read (every platform the driver ships for), and only their headers,
program headers and dynamic section, within fixed bounds: a damaged or hostile file on the host is
a :class:`ElfError` naming it, never a long read.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_MAGIC: Final = b"\x7fELF"
_CLASS_64: Final = 2
_LITTLE_ENDIAN: Final = 1
_PT_LOAD: Final = 1
_PT_DYNAMIC: Final = 2
_DT_NULL: Final = 0
_DT_NEEDED: Final = 1
_DT_STRTAB: Final = 5
_DT_STRSZ: Final = 10
_DT_SONAME: Final = 14
_MAX_PROGRAM_HEADERS: Final = 256
_MAX_DYNAMIC_ENTRIES: Final = 4096
_MAX_STRING_TABLE: Final = 1 << 20
_MAX_NAME: Final = 4096


class ElfError(ValueError):
    """A file that is not a readable 64-bit little-endian shared object; the message names it."""


@dataclass(frozen=True)
class DynamicInfo:
    """A shared object's ``DT_SONAME`` (None when it has none) and ``DT_NEEDED`` names, in order."""

    soname: str | None
    needed: tuple[str, ...]


def read_dynamic_info(path: Path) -> DynamicInfo:
    """The soname and needed libraries of the ELF file at ``path`` (symlinks followed)."""
    try:
        with path.open("rb") as file:
            return _read(file.fileno(), path)
    except OSError as exc:
        raise ElfError(f"{path}: {exc.strerror or exc}") from exc


def _read(fd: int, path: Path) -> DynamicInfo:
    header = os.pread(fd, 64, 0)
    if len(header) < 64 or header[:4] != _MAGIC:
        raise ElfError(f"{path}: not an ELF file")
    if header[4] != _CLASS_64 or header[5] != _LITTLE_ENDIAN:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    (phoff,) = struct.unpack_from("<Q", header, 32)
    phentsize, phnum = struct.unpack_from("<HH", header, 54)
    if phnum > _MAX_PROGRAM_HEADERS or phentsize < 56:
        raise ElfError(f"{path}: implausible program header table ({phnum} entries of {phentsize} bytes)")
    table = os.pread(fd, phnum * phentsize, phoff)
    if len(table) < phnum * phentsize:
        raise ElfError(f"{path}: truncated program header table")
    loads: list[tuple[int, int, int]] = []  # (virtual address, file offset, file size)
    dynamic: tuple[int, int] | None = None  # (file offset, size)
    for index in range(phnum):
        kind, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", table, index * phentsize)
        if kind == _PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif kind == _PT_DYNAMIC:
            dynamic = (offset, filesz)
    if dynamic is None:
        raise ElfError(f"{path}: no dynamic section (a static executable, not a shared library)")
    entries = _dynamic_entries(fd, path, *dynamic)
    strtab_address = entries.get(_DT_STRTAB, [None])[0]
    strtab_size = entries.get(_DT_STRSZ, [0])[0]
    if strtab_address is None or not 0 < strtab_size <= _MAX_STRING_TABLE:
        raise ElfError(f"{path}: dynamic section without a usable string table")
    strtab_offset = _file_offset(loads, strtab_address, path)
    strings = os.pread(fd, strtab_size, strtab_offset)

    def name_at(index: int) -> str:
        if not 0 <= index < len(strings):
            raise ElfError(f"{path}: a dynamic entry points outside the string table")
        end = strings.find(b"\0", index, index + _MAX_NAME)
        if end < 0:
            raise ElfError(f"{path}: an unterminated name in the string table")
        return strings[index:end].decode("utf-8", "replace")

    sonames = entries.get(_DT_SONAME, [])
    return DynamicInfo(
        soname=name_at(sonames[0]) if sonames else None,
        needed=tuple(name_at(index) for index in entries.get(_DT_NEEDED, [])),
    )


def _dynamic_entries(fd: int, path: Path, offset: int, size: int) -> dict[int, list[int]]:
    count = min(size // 16, _MAX_DYNAMIC_ENTRIES)
    data = os.pread(fd, count * 16, offset)
    entries: dict[int, list[int]] = {}
    for index in range(len(data) // 16):
        tag, value = struct.unpack_from("<qQ", data, index * 16)
        if tag == _DT_NULL:
            return entries
        entries.setdefault(tag, []).append(value)
    raise ElfError(f"{path}: the dynamic section has no end within {count} entries")


def _file_offset(loads: list[tuple[int, int, int]], address: int, path: Path) -> int:
    """Where the loaded address ``address`` lies in the file (the segment that maps it)."""
    for vaddr, offset, filesz in loads:
        if vaddr <= address < vaddr + filesz:
            return offset + (address - vaddr)
    raise ElfError(f"{path}: the string table lies in no loaded segment")
