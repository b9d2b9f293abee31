"""Where the plugin's two sockets live, named per instance so two instances can overlap.

During a rolling update of the DaemonSet (maxSurge 1, maxUnavailable 0) the new Pod starts while
the old one still serves, so each instance names its sockets after its own identity (the Pod UID):
``<kubelet>/plugins/<driver>/dra-<instance>.sock`` for the DRA service and
``<kubelet>/plugins_registry/<driver>-<instance>-reg.sock`` for registration. The kubelet keeps
both registrations and uses the newest; when the old Pod stops and removes its registration socket,
nothing is left that fails a prepare. (NVIDIA's driver runs maxUnavailable 100% for want of this.)

A unix socket path is limited to 108 bytes by the kernel, and gRPC's core refuses paths of 106
bytes or more (measured with grpcio 1.85); like the upstream helper, a shorter hashed name is used
when the readable one does not fit. Sockets are 0600: only root (the kubelet) may connect.

An instance killed with SIGKILL leaves its sockets behind, and the kubelet would keep a dead
registration. :func:`remove_dead_sockets` removes sockets of this driver that nobody serves
(connecting is refused), so the next instance cleans up after a crashed one.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import logging
import socket
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

GRPC_PATH_MAX = 105  # the longest unix socket path grpcio binds
SOCKET_MODE = 0o600


@dataclass(frozen=True)
class SocketPaths:
    registration: Path
    dra: Path


def _fits(path: Path) -> bool:
    return len(str(path).encode()) <= GRPC_PATH_MAX


def _short(*parts: str, size: int) -> str:
    digest = hashlib.sha256("\0".join(parts).encode()).digest()[:size]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def socket_paths(*, kubelet_root: Path, driver: str, instance: str) -> SocketPaths:
    """The sockets of one instance; the first candidate name that fits the limit wins."""
    plugin_dir = kubelet_root / "plugins" / driver
    registry = kubelet_root / "plugins_registry"
    dra_candidates = [
        plugin_dir / f"dra-{instance}.sock",
        plugin_dir / f"dra-{_short(instance, size=8)}.sock",
    ]
    reg_candidates = [
        registry / f"{driver}-{instance}-reg.sock",
        registry / f"{driver}-{_short(instance, size=8)}-reg.sock",
        registry / f"dra-{_short(driver, instance, size=16)}-reg.sock",
    ]
    dra = next((p for p in dra_candidates if _fits(p)), None)
    registration = next((p for p in reg_candidates if _fits(p)), None)
    if dra is None or registration is None:
        raise ValueError(f"kubelet root {kubelet_root} is too long for unix socket paths of driver {driver}")
    return SocketPaths(registration=registration, dra=dra)


def is_served(path: Path) -> bool:
    """Whether a process accepts connections on the socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError as exc:
            if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
                return False
            raise
    return True


def dra_sockets(*, kubelet_root: Path, driver: str) -> list[Path]:
    """The DRA service sockets of every instance of ``driver`` on the node, served or not."""
    return list((kubelet_root / "plugins" / driver).glob("dra-*.sock"))


def any_instance_serves(*, kubelet_root: Path, driver: str) -> bool:
    """Whether an instance of ``driver`` serves the kubelet on this node now."""
    return any(
        path.is_socket() and is_served(path) for path in dra_sockets(kubelet_root=kubelet_root, driver=driver)
    )


def remove_dead_sockets(*, kubelet_root: Path, driver: str, keep: SocketPaths) -> list[Path]:
    """Removes this driver's sockets that no process serves any more; returns what it removed."""
    candidates = [
        *dra_sockets(kubelet_root=kubelet_root, driver=driver),
        *(kubelet_root / "plugins_registry").glob(f"{driver}-*-reg.sock"),
    ]
    removed = []
    for path in candidates:
        if path in (keep.dra, keep.registration) or not path.is_socket():
            continue
        try:
            if is_served(path):
                continue
            path.unlink()
        except OSError as exc:
            logger.warning("could not check or remove socket %s: %s", path, exc)
            continue
        logger.info("removed a socket nobody serves (a previous instance died)", extra={"socket": str(path)})
        removed.append(path)
    return removed
