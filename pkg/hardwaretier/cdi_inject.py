"""Applying CDI devices to a bundle's ``config.json`` with the CDI library itself.

``cdi-validate inject`` (``hack/tools/cdi``) loads the spec folders into the CDI library's cache
and calls its ``InjectDevices`` — what containerd does for a container given CDI device IDs — so
the container gets exactly what a runtime would give it from our specs, and nothing else. The
tool is built on a machine with Go (``bash hack/tools/build.sh cdi``) and copied to the GPU node,
as is NVIDIA's ``nvidia-cdi-hook`` that the base spec's hooks run; :func:`find_tool` looks in
``$GPU_CP_BIN_DIR`` (where ``make`` puts the built tools), then on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

TOOL: Final = "cdi-validate"
BIN_DIR_ENV: Final = "GPU_CP_BIN_DIR"


class InjectError(RuntimeError):
    """The CDI library refused to apply the devices; the message is its answer."""


def find_tool(name: str, *, module: str, env: Mapping[str, str] = os.environ) -> Path:
    """A tool built from ``hack/tools/<module>``: from ``$GPU_CP_BIN_DIR``, else from ``PATH``; an
    error saying how to bring it otherwise."""
    bin_dir = env.get(BIN_DIR_ENV)
    if bin_dir:
        candidate = Path(bin_dir) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(name, path=env.get("PATH", os.defpath))
    if on_path:
        return Path(on_path)
    where = f"${BIN_DIR_ENV}={bin_dir} has no executable {name} and " if bin_dir else ""
    raise FileNotFoundError(
        f"{where}{name} is not on PATH: build it where Go is installed (bash hack/tools/build.sh {module}), "
        f"copy it here and set {BIN_DIR_ENV} to its folder or put it on PATH"
    )


def find_cdi_tool(env: Mapping[str, str] = os.environ) -> Path:
    """``cdi-validate`` (module ``cdi``) by :func:`find_tool`'s rule."""
    return find_tool(TOOL, module="cdi", env=env)


def inject(tool: Path, *, spec_dirs: Sequence[Path], config: Path, devices: Sequence[str]) -> str:
    """Applies ``devices`` (qualified CDI names) from ``spec_dirs`` to ``config`` in place;
    returns the tool's report. :class:`InjectError` with the library's words when it refuses."""
    if not devices:
        raise InjectError(f"{config}: no CDI device to apply")
    argv = [str(tool), "inject"]
    for folder in spec_dirs:
        argv += ["--spec-dir", str(folder)]
    argv += ["--config", str(config), *devices]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise InjectError(result.stderr.strip() or f"{tool} inject failed with exit {result.returncode}")
    return result.stdout.strip()
