"""The gpu-control-plane image, assembled without a registry and imported into local nodes.

The ``Containerfile`` builds the image where a registry is reachable (``make image``). Tests and
``make demo`` cannot pull ``debian:bookworm-slim``, so this module builds the same image from what
is reachable — the Debian archive and PyPI — by running the Containerfile's steps itself:

1. a Debian root per stage, made with ``debootstrap --variant=minbase`` and the stage's packages
   from ``hack/image/packages.txt`` (cached by that list: a minute the first time);
2. the wheels of the project and of its pinned dependencies (``assemble.sh wheels``, with the
   checkout's pip and its warm cache);
3. the virtualenv, made inside a copy of the build root entered with ``chroot`` (``assemble.sh
   venv``), so it is Debian's own ``python3`` that makes and later runs it, as in the Containerfile;
4. the runtime root (``assemble.sh slim``) plus that virtualenv and the programs built from Go
   modules that the image ships (NVIDIA's ``nvidia-cdi-hook``, which gpu-handler puts on the host:
   the binary ``make tools`` built, as the Containerfile's Go stage builds it), written as one layer
   of a Docker image archive (the format ``ctr images import`` reads), with the Containerfile's
   ``PATH``, user and working folder.

Both paths read the same package list and run the same script, which is what keeps them from
drifting; ``test/unit/devcluster/test_project_image.py`` checks that the Containerfile still calls
every step and that the image configuration here matches its ``ENV``/``USER`` lines.

Archives are cached by a key over everything that goes in (the package list, the script, every
wheel), under ``<cache>/images/``; building needs root (debootstrap, chroot).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pkg.devcluster.images import REGISTRY, ImageArchive, image_config

log = logging.getLogger(__name__)

PROJECT_REPOSITORY = f"{REGISTRY}/gpu-control-plane"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
VENV = "/opt/gpu-control-plane"
# The Containerfile's ENV and USER lines, as the image configuration (a unit test compares them).
IMAGE_ENV = (
    f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
)
IMAGE_USER = "65532:65532"
# Bump when the way roots or layers are made changes, so cached archives are not reused.
RECIPE_REVISION = "1"
# Layers kept in the cache (each ~360 MiB): every source change makes a new one.
KEEP_LAYERS = 3
# Never part of an image layer: the runtime supplies them.
_RUNTIME_DIRS = ("dev", "proc", "sys", "run")


def image_dir(source: Path) -> Path:
    return source / "hack" / "image"


def stage_packages(source: Path, stage: str) -> list[str]:
    """The Debian packages of ``stage`` in ``hack/image/packages.txt``."""
    packages = []
    for line in (image_dir(source) / "packages.txt").read_text().splitlines():
        fields = line.split()
        if len(fields) == 2 and not line.startswith("#") and fields[0] == stage:
            packages.append(fields[1])
    if not packages:
        raise ValueError(f"hack/image/packages.txt names no package of stage {stage!r}")
    return packages


SHIPPED_TOOLS = ("nvidia-cdi-hook",)  # into the virtualenv's bin/, from the built tools


def build_project_image(
    target: Path, *, tags: Sequence[str], source: Path, cache_dir: Path, pip: Path, tools: Path
) -> ImageArchive:
    """Writes the image under every reference in ``tags`` into the archive ``target``; ``tools``
    is the folder of the built tools (:data:`SHIPPED_TOOLS` are taken from there)."""
    missing = [name for name in SHIPPED_TOOLS if not (tools / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not built in {tools}: run `make tools`")
    cache = cache_dir / "images"
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpucp-image-", dir=cache) as scratch:
        work = Path(scratch)
        wheels = work / "wheels"
        _assemble(source, ["wheels", str(source), str(wheels)], env={"PIP": str(pip)})
        shipped = [tools / name for name in SHIPPED_TOOLS]
        key = _key(source, wheels, shipped)
        layer = cache / f"gpu-control-plane-{key}.layer.tar"
        if not layer.exists():
            _build_layer(source, wheels, work, cache, layer, shipped=shipped)
        else:
            log.info("reusing the image layer %s", layer.name)
    return _write_archive(target, layer, tags)


def _key(source: Path, wheels: Path, shipped: Sequence[Path]) -> str:
    digest = hashlib.sha256(RECIPE_REVISION.encode())
    for path in sorted(image_dir(source).iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    for file in [*sorted(wheels.iterdir()), *shipped]:
        digest.update(file.name.encode() + hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()[:16]


def _build_layer(
    source: Path, wheels: Path, work: Path, cache: Path, layer: Path, *, shipped: Sequence[Path]
) -> None:
    runtime = stage_packages(source, "runtime")
    build_root = _copy(_debian_root(runtime + stage_packages(source, "build"), cache), work / "build")
    shutil.copytree(wheels, build_root / "tmp" / "wheels")
    _chroot(source, build_root, ["venv", "/tmp/wheels"])
    final_root = _copy(_debian_root(runtime, cache), work / "final")
    _chroot(source, final_root, ["slim"])
    shutil.copytree(build_root / VENV.lstrip("/"), final_root / VENV.lstrip("/"), symlinks=True)
    for tool in shipped:
        shutil.copyfile(tool, final_root / VENV.lstrip("/") / "bin" / tool.name)
        os.chmod(final_root / VENV.lstrip("/") / "bin" / tool.name, 0o755)
    partial = layer.with_suffix(".partial")
    _write_layer(final_root, partial)
    partial.replace(layer)  # only a complete layer ever carries the final name
    _prune(cache, keep=layer)
    log.info("built the image layer %s (%d MB)", layer.name, layer.stat().st_size >> 20)


def _prune(cache: Path, *, keep: Path) -> None:
    """Deletes all but the newest :data:`KEEP_LAYERS` layers (``keep`` always stays)."""
    layers = sorted(
        cache.glob("gpu-control-plane-*.layer.tar"), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for old in layers[KEEP_LAYERS:]:
        if old != keep:
            old.unlink(missing_ok=True)


def _debian_root(packages: list[str], cache: Path) -> Path:
    """A minimal Debian root with ``packages``, cached by the list (debootstrap takes a minute)."""
    name = hashlib.sha256(" ".join(sorted(packages)).encode()).hexdigest()[:12]
    root = cache / f"debian-{DEBIAN_SUITE}-{name}"
    if root.is_dir():
        return root
    partial = cache / f"{root.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    if shutil.which("debootstrap") is None:
        raise FileNotFoundError("debootstrap is missing: run `make host-packages` (Debian debootstrap)")
    log.info("debootstrap %s with %s (about a minute)", DEBIAN_SUITE, ", ".join(packages))
    _run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(packages)}",
            DEBIAN_SUITE,
            str(partial),
            DEBIAN_MIRROR,
        ],
        timeout=900,
    )
    partial.rename(root)
    return root


def _copy(root: Path, target: Path) -> Path:
    _run(["cp", "-a", f"{root}/.", f"{target}/"], timeout=300, mkdir=target)
    return target


def _chroot(source: Path, root: Path, step: list[str]) -> None:
    """Runs ``assemble.sh <step>`` inside ``root``, with the script copied in and removed after."""
    scripts = root / "tmp" / "image"
    shutil.copytree(image_dir(source), scripts)
    try:
        _run(["chroot", str(root), "/tmp/image/assemble.sh", *step], timeout=600, env={"PIP_FIND_LINKS": ""})
    finally:
        shutil.rmtree(scripts)


def _assemble(source: Path, step: list[str], *, env: dict[str, str]) -> None:
    _run([str(image_dir(source) / "assemble.sh"), *step], timeout=600, env=env)


def _run(
    argv: list[str], *, timeout: float, env: dict[str, str] | None = None, mkdir: Path | None = None
) -> None:
    if mkdir is not None:
        mkdir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({result.returncode}): {result.stderr[-2000:]}")


def _write_layer(root: Path, target: Path) -> None:
    """The root as one reproducible layer: sorted, every mtime 0, owners kept, runtime folders empty."""

    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        top, _, rest = info.name.partition("/")
        if top in _RUNTIME_DIRS and rest:
            return None
        if info.isdev() or info.isfifo():
            return None
        info.mtime, info.uname, info.gname = 0, "", ""
        return info

    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as layer:
        for entry in sorted(os.listdir(root)):
            layer.add(root / entry, arcname=entry, filter=normalise)


def _write_archive(target: Path, layer: Path, tags: Sequence[str]) -> ImageArchive:
    digest = hashlib.sha256()
    with layer.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    layer_digest = digest.hexdigest()
    config = image_config(
        layer_digest,
        {"Env": list(IMAGE_ENV), "User": IMAGE_USER, "WorkingDir": "/"},
        source="hack/image/assemble.sh (debootstrap + PyPI)",
    )
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    layer_name = f"{layer_digest}/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": list(tags), "Layers": [layer_name]}]).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in ((config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
        archive.add(layer, arcname=layer_name, filter=_fixed_time)
    return ImageArchive(path=target, references=tuple(tags))


def _fixed_time(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info
