"""Container images for the local nodes, built without a registry.

No registry is reachable where tests and the demo run, so images are assembled here from a binary
a Debian package installs (``busybox-static``: one static executable that is a shell and 270
utilities) and imported into each node's containerd. The result is a Docker image archive (the
format ``ctr images import`` reads) holding two images over one shared layer:

* :data:`BUSYBOX_IMAGE`, the workload image tests and the demo run (``imagePullPolicy: Never``);
* :data:`GLIBC_IMAGE`, the busybox image plus the machine's C library and a program that loads a
  library by name the way a CUDA program loads ``libcuda.so.1`` (:data:`LOAD_PROBE`): a glibc
  image whose ld cache knows nothing of any GPU driver, as most users' images are, for the tests
  of the driver files our CDI specs give a container;
* :data:`PAUSE_IMAGE`, the pod sandbox image containerd pins. A sandbox only has to hold the
  Pod's namespaces and exit on SIGTERM; a shell that traps TERM and sleeps does that. (PID 1 in a
  container ignores signals it installs no handler for, hence the trap.)

The archive is reproducible: fixed timestamps and owners, so its digest only changes when the
busybox binary does.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
REGISTRY = "gpucp.test"  # a reserved top-level domain: never resolves, so nothing is ever pulled
BUSYBOX_IMAGE = f"{REGISTRY}/busybox:1.35"
PAUSE_IMAGE = f"{REGISTRY}/pause:1.35"
GLIBC_IMAGE = f"{REGISTRY}/glibc:1.35"
LOAD_PROBE = "/usr/bin/load-library"  # load-library NAME: prints the path the loader chose, or fails
# The C library the probe needs, and ldconfig (static), so that `ldconfig -p` shows the ld cache.
_GLIBC_FILES = (
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/sbin/ldconfig",
)
_LOAD_PROBE_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: load-library NAME\n"); return 2; }
    void *handle = dlopen(argv[1], RTLD_NOW);
    if (!handle) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    struct link_map *map = 0;
    dlinfo(handle, RTLD_DI_LINKMAP, &map);
    printf("%s => %s\n", argv[1], map->l_name);
    return 0;
}
"""
_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PAUSE_COMMAND = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]


@dataclass(frozen=True)
class ImageArchive:
    """An archive on disk and the references it holds."""

    path: Path
    references: tuple[str, ...]


def build_archive(target: Path, *, busybox: Path = BUSYBOX) -> ImageArchive:
    """Writes the two images into ``target`` (a ``.tar``); cheap, so callers build per run."""
    if not busybox.is_file():
        raise FileNotFoundError(f"{busybox} is missing: run `make host-packages` (Debian busybox-static)")
    layer = _busybox_layer(busybox)
    layer_digest = hashlib.sha256(layer).hexdigest()
    glibc = _glibc_layer()
    glibc_digest = hashlib.sha256(glibc).hexdigest()
    images = {
        BUSYBOX_IMAGE: ({"Cmd": ["/bin/sh"]}, [layer_digest]),
        PAUSE_IMAGE: ({"Entrypoint": _PAUSE_COMMAND}, [layer_digest]),
        GLIBC_IMAGE: ({"Cmd": ["/bin/sh"]}, [layer_digest, glibc_digest]),
    }
    manifest = []
    members: dict[str, bytes] = {f"{layer_digest}/layer.tar": layer, f"{glibc_digest}/layer.tar": glibc}
    for reference, (run, layers) in images.items():
        config = image_config(layers, {"Env": [_PATH_ENV], "WorkingDir": "/", **run}, source=str(busybox))
        config_name = f"{hashlib.sha256(config).hexdigest()}.json"
        members[config_name] = config
        manifest.append(
            {"Config": config_name, "RepoTags": [reference], "Layers": [f"{d}/layer.tar" for d in layers]}
        )
    members["manifest.json"] = json.dumps(manifest).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members.items():
            _add_file(archive, name, data)
    return ImageArchive(path=target, references=tuple(images))


def image_config(layer_digest: str | list[str], run: dict[str, object], *, source: str) -> bytes:
    """The configuration of an amd64 image of the given layers, bottom first (what ``config`` of
    an image manifest names)."""
    digests = [layer_digest] if isinstance(layer_digest, str) else layer_digest
    return json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": run,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest}" for digest in digests]},
            "history": [{"created_by": f"gpu-control-plane devcluster from {source}"}],
        },
        sort_keys=True,
    ).encode()


def _busybox_layer(busybox: Path) -> bytes:
    """A root filesystem: busybox, a link per applet, and the folders programs expect."""
    applets = subprocess.run(
        [str(busybox), "--list-full"], capture_output=True, text=True, check=True, timeout=10
    ).stdout.split()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for folder in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root", "var"):
            _add_dir(layer, folder, mode=0o1777 if folder == "tmp" else 0o755)
        _add_file(layer, "bin/busybox", busybox.read_bytes(), mode=0o755)
        for applet in sorted(set(applets) - {"bin/busybox"}):
            _add_symlink(layer, applet, "/bin/busybox")
        _add_file(layer, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
        _add_file(layer, "etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    return buffer.getvalue()


def _glibc_layer() -> bytes:
    """The machine's C library, ldconfig and the load probe (compiled here), without an ld cache."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as scratch:
        source, probe = Path(scratch) / "probe.c", Path(scratch) / "load-library"
        source.write_text(_LOAD_PROBE_SOURCE)
        subprocess.run(["cc", "-O2", "-o", str(probe), str(source), "-ldl"], check=True, capture_output=True)
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
            for folder in ("lib", "lib64", "lib/x86_64-linux-gnu", "usr/bin", "sbin"):
                _add_dir(layer, folder)
            for path in _GLIBC_FILES:
                _add_file(layer, path.lstrip("/"), Path(path).resolve().read_bytes(), mode=0o755)
            _add_file(layer, LOAD_PROBE.lstrip("/"), probe.read_bytes(), mode=0o755)
    return buffer.getvalue()


def _info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.uid, info.gid = kind, mode, 0, 0, 0
    return info


def _add_dir(archive: tarfile.TarFile, name: str, *, mode: int = 0o755) -> None:
    archive.addfile(_info(name, tarfile.DIRTYPE, mode))


def _add_file(archive: tarfile.TarFile, name: str, data: bytes, *, mode: int = 0o644) -> None:
    info = _info(name, tarfile.REGTYPE, mode)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def _add_symlink(archive: tarfile.TarFile, name: str, target: str) -> None:
    info = _info(name, tarfile.SYMTYPE, 0o777)
    info.linkname = target
    archive.addfile(info)


def static_binary_archive(target: Path, *, reference: str, binary: Path) -> ImageArchive:
    """An image of one static executable (a Go tool built with CGO off, e.g. kube-rbac-proxy, as
    ``hack/tools/build.sh`` builds it) as its entry point, run as a non-root user: what the tool's
    upstream image holds, made from the binary we build instead of pulled."""
    if not binary.is_file():
        raise FileNotFoundError(f"{binary} is missing: run `make tools`")
    name = binary.resolve().name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as layer:
        for folder in ("etc", "tmp", "usr", "usr/local", "usr/local/bin"):
            _add_dir(layer, folder, mode=0o1777 if folder == "tmp" else 0o755)
        _add_file(
            layer,
            "etc/passwd",
            b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532::/:/sbin/nologin\n",
        )
        _add_file(layer, "etc/group", b"root:x:0:\nnonroot:x:65532:\n")
        _add_file(layer, f"usr/local/bin/{name}", binary.read_bytes(), mode=0o755)
    return _single_layer_archive(
        target,
        reference=reference,
        layer=buffer.getvalue(),
        run={"Entrypoint": [f"/usr/local/bin/{name}"], "User": "65532:65532"},
        source=str(binary),
    )


def _single_layer_archive(
    target: Path, *, reference: str, layer: bytes, run: dict[str, object], source: str
) -> ImageArchive:
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = image_config(layer_digest, {"Env": [_PATH_ENV], "WorkingDir": "/", **run}, source=source)
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = [{"Config": config_name, "RepoTags": [reference], "Layers": [f"{layer_digest}/layer.tar"]}]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as archive:
        _add_file(archive, f"{layer_digest}/layer.tar", layer)
        _add_file(archive, config_name, config)
        _add_file(archive, "manifest.json", json.dumps(manifest).encode())
    return ImageArchive(path=target, references=(reference,))
