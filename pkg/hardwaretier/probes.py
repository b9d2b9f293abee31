"""The graphics, video and OpenCL probes: small C programs, one line each, built with gcc.

Each program (``test/hardware/graphics/<name>.c``) opens its API's library by soname with
``dlopen`` — the loaders from the container's image, NVIDIA's libraries from our CDI specs — and
prints one line: ``<CHECK> OK ...`` with exit 0, or ``<CHECK> FAIL <reason>`` with exit 1 (the
Vulkan probe also ``VULKAN NO DEVICE``, exit 2). They declare the few types and functions they
use, so the host needs gcc and libc6-dev only: no Vulkan, EGL, OpenCL or driver headers, and no
link to any of those libraries, so a missing one is that line, not a loader error before ``main``.

Where they come from: ``$GPU_CP_PROBE_PROGRAMS`` names a folder holding all of them built
elsewhere (a GPU node without gcc; x86-64 builds run on any x86-64 glibc as new as the builder's),
else they are built with ``$CC`` or ``gcc`` from ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

PROGRAMS_ENV: Final = "GPU_CP_PROBE_PROGRAMS"
CC_ENV: Final = "CC"
VULKAN: Final = "vulkan_probe"
EGL: Final = "egl_probe"
NVENC: Final = "nvenc_probe"
NVDEC: Final = "nvdec_probe"
OPENCL: Final = "opencl_probe"
DLOPEN: Final = "dlopen_probe"  # LOADED <soname> / NOT LOADED <soname>: <reason>
PROBES: Final = (VULKAN, EGL, NVENC, NVDEC, OPENCL, DLOPEN)
# The first word(s) of each probe's line, in the order they are tried (NOT LOADED before LOADED).
_PREFIXES: Final = ("VULKAN ", "EGL ", "NVENC ", "NVDEC ", "OPENCL ", "NOT LOADED ", "LOADED ")


class ProbeBuildError(RuntimeError):
    """gcc failed, or a prebuilt folder lacks a probe; the message names the program."""


def find_compiler(env: Mapping[str, str] = os.environ) -> Path | None:
    """``$CC``, else ``gcc`` on ``PATH``; ``None`` when the host has neither."""
    named = env.get(CC_ENV)
    if named:
        return Path(named)
    on_path = shutil.which("gcc", path=env.get("PATH", os.defpath))
    return Path(on_path) if on_path else None


def compile_command(compiler: Path, *, source: Path, output: Path) -> list[str]:
    """The compile line: warnings on, ``-ldl`` for glibc older than 2.34 (a no-op after)."""
    return [str(compiler), "-O2", "-Wall", "-Wextra", "-o", str(output), str(source), "-ldl"]


def build_probes(
    compiler: Path, *, source_dir: Path, output_dir: Path, names: Sequence[str] = PROBES
) -> dict[str, Path]:
    """Compiles ``<source_dir>/<name>.c`` to ``<output_dir>/<name>`` for each name; a
    :class:`ProbeBuildError` with the compiler's output for the first that fails."""
    output_dir.mkdir(parents=True, exist_ok=True)
    built = {}
    for name in names:
        argv = compile_command(compiler, source=source_dir / f"{name}.c", output=output_dir / name)
        try:
            result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        except FileNotFoundError:
            raise ProbeBuildError(f"{compiler} is not installed: install gcc and libc6-dev") from None
        if result.returncode != 0:
            command = " ".join(argv)
            raise ProbeBuildError(
                f"building {name}: {command} failed (exit {result.returncode}):\n{result.stderr.strip()}"
            )
        built[name] = output_dir / name
    return built


def prebuilt_probes(
    env: Mapping[str, str] = os.environ, names: Sequence[str] = PROBES
) -> dict[str, Path] | None:
    """The probes in the folder ``$GPU_CP_PROBE_PROGRAMS`` names; ``None`` when unset, an error
    naming each one the folder lacks."""
    named = env.get(PROGRAMS_ENV)
    if not named:
        return None
    folder = Path(named)
    found = {name: folder / name for name in names}
    missing = [name for name, path in found.items() if not (path.is_file() and os.access(path, os.X_OK))]
    if missing:
        raise ProbeBuildError(f"${PROGRAMS_ENV}={named} lacks the executable probes {', '.join(missing)}")
    return found


def probe_line(stdout: str) -> str | None:
    """The probe's one line in a run's output (other lines, such as a hook's, skipped)."""
    for line in stdout.splitlines():
        if line.startswith(_PREFIXES):
            return line.strip()
    return None
