"""The loaders a container image brings, from Debian's packages, never from the driver.

A Pod that renders or computes through Vulkan, EGL or OpenCL carries the API's loader in its
image (``libvulkan1``, ``libegl1``/``libglvnd0``, ``ocl-icd-libopencl1``); the driver's part —
the ICD and vendor files that point the loaders at NVIDIA's libraries, and those libraries — must
come from our CDI specs. So the graphics checks' root gets exactly these packages' files, pinned
in a list (``<package> <version pattern>``, the format of ``hack/host-packages.txt``), and the
root's guard (:func:`.rootfs.nvidia_files`) still refuses any file of the driver's.

The GPU node usually has no network: the ``.deb`` files are fetched where there is one
(``apt-get download``, no root needed) into a folder that travels with the tier, and found there
by package name and version (``dpkg-deb --field``), whatever the files are called. They are
unpacked with ``dpkg-deb --extract``, which runs no maintainer script: only the files land.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.hardwaretier.rootfs import nvidia_files

DEBS_ENV: Final = "GPU_CP_LOADER_DEBS"


class LoaderPackageError(RuntimeError):
    """A pinned package is missing, at another version, or cannot be fetched or unpacked; the
    message names it."""


@dataclass(frozen=True)
class Pin:
    """One package of the list and the versions accepted (a glob, as apt's ``pkg=pattern``)."""

    package: str
    pattern: str

    def accepts(self, version: str) -> bool:
        return fnmatch.fnmatchcase(version, self.pattern)


def read_pins(path: Path) -> list[Pin]:
    """The pins of a ``<package> <version pattern>`` list; comments and blank lines skipped."""
    pins = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise LoaderPackageError(f"{path}:{number}: expected '<package> <version pattern>', got {line!r}")
        pins.append(Pin(package=fields[0], pattern=fields[1]))
    if not pins:
        raise LoaderPackageError(f"{path} names no package")
    return pins


def default_debs_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$GPU_CP_LOADER_DEBS``, else ``loader-debs/`` in the project's cache (``$GPU_CP_CACHE_DIR``,
    default ``~/.cache/gpu-control-plane``)."""
    named = env.get(DEBS_ENV)
    if named:
        return Path(named)
    cache = env.get("GPU_CP_CACHE_DIR") or str(Path.home() / ".cache" / "gpu-control-plane")
    return Path(cache) / "loader-debs"


def _run(
    argv: Sequence[str], *, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, check=False, cwd=cwd, timeout=timeout
        )
    except FileNotFoundError as exc:
        raise LoaderPackageError(f"{argv[0]} is not installed: {exc}") from None


def package_of(deb: Path) -> tuple[str, str]:
    """The package name and version a ``.deb`` holds, read from its control file."""
    result = _run(["dpkg-deb", "--field", str(deb), "Package", "Version"])
    fields = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    if result.returncode != 0 or "Package" not in fields or "Version" not in fields:
        raise LoaderPackageError(
            f"{deb} is not a Debian package: {result.stderr.strip() or result.stdout.strip()}"
        )
    return fields["Package"], fields["Version"]


def find_debs(folder: Path, pins: Sequence[Pin]) -> dict[str, Path]:
    """Each pinned package's ``.deb`` in ``folder``, by package name; an error naming every pin
    that has no file there at an accepted version (and the versions that were there)."""
    found: dict[str, Path] = {}
    seen: dict[str, list[str]] = {}
    wanted = {pin.package: pin for pin in pins}
    for deb in sorted(folder.glob("*.deb")) if folder.is_dir() else []:
        package, version = package_of(deb)
        if package not in wanted:
            continue
        seen.setdefault(package, []).append(version)
        if wanted[package].accepts(version):
            found[package] = deb
    missing = [pin for pin in pins if pin.package not in found]
    if missing:
        named = ", ".join(
            f"{pin.package} {pin.pattern}"
            + (f" (there: {', '.join(seen[pin.package])})" if pin.package in seen else "")
            for pin in missing
        )
        raise LoaderPackageError(f"{folder} lacks the loader packages {named}")
    return found


def download_debs(folder: Path, pins: Sequence[Pin]) -> dict[str, Path]:
    """``apt-get download`` of every pin into ``folder`` (apt's candidate version, which must match
    its pin), then :func:`find_debs`."""
    folder.mkdir(parents=True, exist_ok=True)
    result = _run(["apt-get", "download", *(pin.package for pin in pins)], cwd=folder, timeout=600)
    if result.returncode != 0:
        raise LoaderPackageError(
            f"apt-get download of the loader packages into {folder} failed (exit {result.returncode}): "
            f"{result.stderr.strip()}"
        )
    return find_debs(folder, pins)


def ensure_debs(folder: Path, pins: Sequence[Pin]) -> dict[str, Path]:
    """The pinned ``.deb`` files in ``folder``, downloading them first when any is missing."""
    try:
        return find_debs(folder, pins)
    except LoaderPackageError as missing:
        try:
            return download_debs(folder, pins)
        except LoaderPackageError as failed:
            raise LoaderPackageError(f"{missing}; fetching them failed: {failed}") from None


def extract_debs(debs: Mapping[str, Path], target: Path) -> Path:
    """Unpacks every ``.deb`` into ``target`` (files only, no script run); refuses the result if
    any of it is named like a file of the NVIDIA driver."""
    target.mkdir(parents=True, exist_ok=True)
    for package, deb in sorted(debs.items()):
        result = _run(["dpkg-deb", "--extract", str(deb), str(target)])
        if result.returncode != 0:
            raise LoaderPackageError(f"unpacking {package} ({deb}) failed: {result.stderr.strip()}")
    found = nvidia_files(target)
    if found:
        raise LoaderPackageError(f"the loader packages hold files of the NVIDIA driver: {', '.join(found)}")
    return target
