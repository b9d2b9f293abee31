"""A program's shared libraries come from the loader its ELF header names, asked with --list."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from pkg.hardwaretier.libraries import (
    LibraryError,
    LoadedFile,
    interpreter,
    parse_loader_list,
    shared_libraries,
)

PROGRAM = Path("/opt/cuda_ok")
LISTING = """\
\tlinux-vdso.so.1 (0x00007ffd5b1e6000)
\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f1c0a200000)
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f1c0a121000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f1c09f40000)
\t/lib64/ld-linux-x86-64.so.2 => /usr/bin/ld.so (0x00007f1c0a4c6000)
"""


def elf(*, interp: bytes | None, bits: int = 64, order: str = "<") -> bytes:
    """A minimal ELF file: a header, one program header (PT_INTERP or PT_LOAD) and the path."""
    word = "Q" if bits == 64 else "I"
    header_size, entry_size = (64, 56) if bits == 64 else (52, 32)
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 1 if order == "<" else 2, 1]) + bytes(9)
    phoff = header_size
    body = interp + b"\0" if interp is not None else b""
    data_offset = phoff + entry_size
    header = ident + struct.pack(
        f"{order}HHI{word}{word}{word}IHHHHHH", 2, 62, 1, 0, phoff, 0, 0, header_size, entry_size, 1, 0, 0, 0
    )
    p_type = 3 if interp is not None else 1
    if bits == 64:
        ph = struct.pack(f"{order}IIQQQQQQ", p_type, 4, data_offset, 0, 0, len(body), len(body), 1)
    else:
        ph = struct.pack(f"{order}IIIIIIII", p_type, data_offset, 0, 0, len(body), len(body), 4, 1)
    return header + ph + body


@pytest.mark.parametrize(("bits", "order"), [(64, "<"), (32, "<"), (64, ">"), (32, ">")])
def test_the_loader_is_read_from_the_program_header(tmp_path: Path, bits: int, order: str) -> None:
    program = tmp_path / "program"
    program.write_bytes(elf(interp=b"/lib/ld-linux.so.2", bits=bits, order=order))

    assert interpreter(program) == "/lib/ld-linux.so.2"


def test_a_program_without_a_loader_is_static(tmp_path: Path) -> None:
    program = tmp_path / "static"
    program.write_bytes(elf(interp=None))

    assert interpreter(program) is None
    assert shared_libraries(program) == []


def test_a_file_that_is_not_elf_is_named(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")

    with pytest.raises(LibraryError, match=rf"{script}: not an ELF executable"):
        interpreter(script)


def test_the_listing_gives_each_file_where_the_program_looks_for_it() -> None:
    assert parse_loader_list(PROGRAM, LISTING) == [
        LoadedFile(
            Path("/lib/x86_64-linux-gnu/libstdc++.so.6"), Path("/lib/x86_64-linux-gnu/libstdc++.so.6")
        ),
        LoadedFile(Path("/lib/x86_64-linux-gnu/libm.so.6"), Path("/lib/x86_64-linux-gnu/libm.so.6")),
        LoadedFile(Path("/lib/x86_64-linux-gnu/libc.so.6"), Path("/lib/x86_64-linux-gnu/libc.so.6")),
        # run by another of its names, the loader is still found where the program asks for it
        LoadedFile(Path("/lib64/ld-linux-x86-64.so.2"), Path("/usr/bin/ld.so")),
    ]


def test_a_library_the_loader_cannot_find_is_named() -> None:
    listing = LISTING + "\tlibcuda.so.1 => not found\n\tlibfoo.so.2 => not found\n"

    with pytest.raises(LibraryError, match=rf"{PROGRAM}: the loader cannot find libcuda.so.1, libfoo.so.2"):
        parse_loader_list(PROGRAM, listing)


def test_an_unexpected_listing_line_is_an_error_not_a_guess() -> None:
    with pytest.raises(LibraryError, match="unexpected line from the loader's --list: 'statically linked'"):
        parse_loader_list(PROGRAM, "\tstatically linked\n")


def test_the_loader_is_asked_with_list(tmp_path: Path) -> None:
    program = tmp_path / "program"
    program.write_bytes(elf(interp=b"/bin/sh"))  # a loader that exists on every host
    asked: list[list[str]] = []

    def loader(argv: list[str]) -> subprocess.CompletedProcess[str]:
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=LISTING, stderr="")

    libraries = shared_libraries(program, run=loader)

    assert asked == [["/bin/sh", "--list", str(program)]]
    assert len(libraries) == 4


def test_a_failing_loader_is_reported_with_its_words(tmp_path: Path) -> None:
    program = tmp_path / "program"
    program.write_bytes(elf(interp=b"/bin/sh"))

    def loader(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 127, stdout="", stderr="cannot execute binary file")

    with pytest.raises(LibraryError, match=r"/bin/sh --list failed \(exit 127\): cannot execute binary file"):
        shared_libraries(program, run=loader)


def test_a_loader_missing_on_this_host_is_named(tmp_path: Path) -> None:
    program = tmp_path / "program"
    program.write_bytes(elf(interp=b"/lib/ld-musl-x86_64.so.1"))

    with pytest.raises(LibraryError, match=r"its loader /lib/ld-musl-x86_64.so.1 is not on this host"):
        shared_libraries(program)


def test_a_real_dynamic_program_of_this_host() -> None:
    program = Path("/usr/bin/env")
    loader = interpreter(program)
    assert loader is not None

    paths = [loaded.path for loaded in shared_libraries(program)]

    assert Path(loader) in paths
    assert any(path.name.startswith("libc.so") for path in paths)
