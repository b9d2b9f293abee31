"""The CUDA program of the tier: built on the GPU node with ``nvcc``, or brought along.

The program (``test/hardware/cuda/cuda_ok.cu``) counts the devices, reads the first one's
properties, runs a vector-add kernel and checks the sums, then prints ``CUDA OK <name>``. It is
compiled for the card's own compute capability (NVML's answer), SASS and PTX both, so it needs
no JIT and no newer compiler than the card requires; the CUDA runtime is linked statically
(``-cudart static``), so the only CUDA library the program opens at run time is the driver's
``libcuda.so.1`` — which the container must get from our CDI specs.

Where ``nvcc`` is: ``$NVCC``, then ``PATH``, then ``$CUDA_HOME/bin`` and ``/usr/local/cuda/bin``.
A node without it can run a binary built elsewhere for the same card: ``$GPU_CP_CUDA_PROGRAM``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

NVCC_ENV: Final = "NVCC"
PROGRAM_ENV: Final = "GPU_CP_CUDA_PROGRAM"
OK_PREFIX: Final = "CUDA OK "


class CudaBuildError(RuntimeError):
    """``nvcc`` failed; the message holds its command and output."""


def find_nvcc(env: Mapping[str, str] = os.environ) -> Path | None:
    """``nvcc`` by the order in the module docs, or ``None`` when the node has none."""
    named = env.get(NVCC_ENV)
    if named:
        return Path(named)
    on_path = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if on_path:
        return Path(on_path)
    for home in (env.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return Path(home) / "bin" / "nvcc"
    return None


def prebuilt_program(env: Mapping[str, str] = os.environ) -> Path | None:
    """The binary ``$GPU_CP_CUDA_PROGRAM`` names; an error when it names no executable file."""
    named = env.get(PROGRAM_ENV)
    if not named:
        return None
    path = Path(named)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"${PROGRAM_ENV}={named} is not an executable file")
    return path


def nvcc_command(nvcc: Path, *, source: Path, output: Path, compute_capability: tuple[int, int]) -> list[str]:
    """The compile line: static CUDA runtime, SASS and PTX for exactly this compute capability."""
    arch = f"{compute_capability[0]}{compute_capability[1]}"
    return [
        str(nvcc),
        "-O2",
        "-cudart",
        "static",
        "--generate-code",
        f"arch=compute_{arch},code=[compute_{arch},sm_{arch}]",
        "-o",
        str(output),
        str(source),
    ]


def build_program(nvcc: Path, *, source: Path, output: Path, compute_capability: tuple[int, int]) -> Path:
    """Compiles ``source`` to ``output``; :class:`CudaBuildError` with nvcc's output on failure."""
    argv = nvcc_command(nvcc, source=source, output=output, compute_capability=compute_capability)
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0:
        raise CudaBuildError(f"{' '.join(argv)} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return output


def product_of(stdout: str) -> str | None:
    """The product the program printed in its ``CUDA OK <product>`` line, if it printed one."""
    for line in stdout.splitlines():
        if line.startswith(OK_PREFIX):
            return line[len(OK_PREFIX) :].strip()
    return None
