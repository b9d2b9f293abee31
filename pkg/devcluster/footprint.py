"""What a node leaves on the machine outside its own folder, and how it is cleaned up.

containerd and the kubelet write a few host-wide paths whatever their configuration says:

* ``/var/log/containers/`` — the kubelet links each container's log here (into its pod-log folder);
* ``/run/containerd/s/`` — containerd's shim sockets;
* ``/var/run/netns/`` — the network namespaces containerd creates for Pod sandboxes;
* ``/sys/fs/cgroup/<controller>/k8s.io/`` — the cgroup parent of containers when, as here, the
  kubelet names none (no per-QoS cgroups on cgroup v1).

A :class:`Footprint` is taken before the first node starts; after the last one stops,
:meth:`Footprint.new_entries` lists what appeared in those places and is still there (a clean stop
leaves none; while other nodes run, their entries are there too, so it is a check for the end), and
:func:`remove_empty_runtime_dirs` removes the folders themselves once they are empty and no
containerd is running, so the machine looks as it did before.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

CONTAINER_LOG_LINKS = Path("/var/log/containers")
SHIM_SOCKETS = Path("/run/containerd/s")
NETNS = Path("/var/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "k8s.io"


def _cgroup_parents() -> list[Path]:
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(p / CGROUP_PARENT for p in CGROUP_ROOT.iterdir() if (p / CGROUP_PARENT).is_dir())


def _entries(folder: Path) -> set[Path]:
    try:
        return {folder / name for name in os.listdir(folder)}
    except OSError:
        return set()


def _watched() -> set[Path]:
    found = _entries(CONTAINER_LOG_LINKS) | _entries(SHIM_SOCKETS) | _entries(NETNS)
    for parent in _cgroup_parents():
        found |= {p for p in _entries(parent) if p.is_dir()}
    return found


@dataclass(frozen=True)
class Footprint:
    """The host-wide entries that existed before a node started."""

    before: frozenset[Path]

    @classmethod
    def take(cls) -> Footprint:
        return cls(frozenset(_watched()))

    def new_entries(self) -> list[Path]:
        return sorted(_watched() - self.before)


def log_links_into(folder: Path) -> list[Path]:
    """The kubelet's links in /var/log/containers that point into ``folder``."""
    prefix = str(folder) + "/"
    found = []
    for link in _entries(CONTAINER_LOG_LINKS):
        with contextlib.suppress(OSError):
            if link.is_symlink() and os.readlink(link).startswith(prefix):
                found.append(link)
    return sorted(found)


def remove_log_links_into(folder: Path) -> None:
    """Removes the kubelet's links in /var/log/containers that point into ``folder``."""
    for link in log_links_into(folder):
        with contextlib.suppress(OSError):
            link.unlink()


def containerd_running() -> bool:
    """Whether any containerd process runs on this machine (ours or anybody's)."""
    for entry in _entries(Path("/proc")):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.path.basename(os.readlink(entry / "exe")) == "containerd":
                    return True
    return False


def remove_empty_runtime_dirs() -> None:
    """Removes containerd's host-wide folders when empty and no containerd could be using them.

    ``rmdir`` fails on a folder that is not empty (or, for a cgroup, still has children or
    processes), so a concurrent user never loses anything; at worst a folder stays.
    """
    if containerd_running():
        return
    for folder in (SHIM_SOCKETS, SHIM_SOCKETS.parent, NETNS, *_cgroup_parents()):
        with contextlib.suppress(OSError):
            folder.rmdir()
