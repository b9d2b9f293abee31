"""Which container a process belongs to, from ``/proc/<pid>/cgroup``.

Container runtimes put each container in a cgroup whose last path element carries the container's
ID, in the forms the kubelet's cgroup drivers and the runtimes produce:

* systemd driver: ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/``
  then ``cri-containerd-<id>.scope`` (containerd), ``crio-<id>.scope`` (CRI-O) or
  ``docker-<id>.scope``; the Pod UID is written with ``_`` for ``-``;
* cgroupfs driver: ``/kubepods/burstable/pod<uid>/<id>`` (both runtimes), and without per-QoS
  cgroups a runtime's own parent such as ``/k8s.io/<id>`` — no Pod UID at all.

So the container ID is the key (a Pod's ``status.containerStatuses[].containerID`` names it), and
the Pod UID, where the path has one, a second way to the Pod. cgroup v2 has one line ``0::<path>``;
v1 has one line per hierarchy, and the first path that names a container wins (every controller
of a container has the same path). A process the file does not tie to a container (a host daemon,
a process in a container runtime we do not know) keeps its path, so it is reported as what it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_MAX_BYTES: Final = 64 << 10
_CONTAINER = re.compile(r"(?:^|/)(?:cri-containerd-|crio-|docker-|libpod-)?([0-9a-f]{64})(?:\.scope)?$")
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True, kw_only=True)
class ProcessCgroup:
    """A process's cgroup path and what it says of the container (``None``: it says nothing)."""

    path: str
    container_id: str | None
    pod_uid: str | None


def parse_cgroup(text: str) -> ProcessCgroup:
    """The process's cgroup from the content of ``/proc/<pid>/cgroup`` (v1 or v2)."""
    paths = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2].startswith("/"):
            paths.append(parts[2].strip())
    for path in paths:
        found = _CONTAINER.search(path)
        if found is not None:
            return ProcessCgroup(path=path, container_id=found.group(1), pod_uid=_pod_uid(path))
    unified = next((line.split(":", 2)[2] for line in text.splitlines() if line.startswith("0::")), None)
    path = unified if unified is not None else (paths[0] if paths else "")
    return ProcessCgroup(path=path, container_id=None, pod_uid=_pod_uid(path))


def read_cgroup(proc: Path, pid: int) -> ProcessCgroup | None:
    """The cgroup of ``pid`` as ``proc`` shows it; ``None`` when the process is gone or hidden."""
    try:
        with (proc / str(pid) / "cgroup").open("rb") as file:
            data = file.read(_MAX_BYTES)
    except OSError:
        return None
    return parse_cgroup(data.decode(errors="replace"))


def _pod_uid(path: str) -> str | None:
    found = _POD_UID.search(path)
    return found.group(1).replace("_", "-") if found is not None else None
