"""Starting a daemon that has to outlive gpu-handler's container: on the host, outside the Pod.

A daemon started for a share (NVIDIA: a card's MPS control daemon) serves the share's containers
for as long as the share lives, which is longer than any one gpu-handler Pod: a rolling update
replaces the Pod while the shares keep running. The container runtime stops a container by
killing every process in its cgroup (runc, for a container in the host's PID namespace; in a PID
namespace of its own every process dies with its init), and the kubelet kills whatever is still in
the Pod's cgroup before it removes it. A daemon started as a child of the handler would go with
the handler, and every client of it would lose its server.

So, with the Pod in the host's PID namespace (``hostPID``), such a daemon is started

* through ``nsenter`` into the mount, UTS, IPC and network namespaces of the nearest ancestor
  outside this container's mount namespace: the container runtime's shim, which runs on the host.
  There the daemon has the host's binaries and paths (the driver installs its tools on the host),
  and no reference to the container's root filesystem, which the runtime removes with the
  container. The host's init (PID 1) would be the obvious target, but a sandboxed host may deny
  access to it; the runtime that started this container is always on the host's side;
* by a shell that first moves itself into the root cgroup of every hierarchy (cgroup v2, or each
  cgroup v1 hierarchy), so the daemon and all it starts are born outside the Pod's cgroups;
* with an environment of its own, the host's ``PATH`` and what the daemon needs, not the
  container's.

A process already in the host's mount namespace (gpu-handler run on the host) skips ``nsenter``.
The root cgroup rather than a unit of the host's service manager: not every host runs systemd,
and the root cgroup is outside the Pod's on all of them. The cost is that the daemon's CPU and
memory count against no Pod, as with a host service.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

HOST_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# cgroup v2 has one hierarchy whose root holds cgroup.procs; under cgroup v1 (or the hybrid
# layout) /sys/fs/cgroup is a tmpfs with one mounted hierarchy per folder, each root with its own.
LEAVE_POD_CGROUPS: Final = (
    "if [ -e /sys/fs/cgroup/cgroup.procs ]; then "
    "echo $$ > /sys/fs/cgroup/cgroup.procs || exit 1; else for procs in /sys/fs/cgroup/*/cgroup.procs; "
    'do echo $$ > "$procs" || exit 1; done; fi'
)


class HostUnreachableError(RuntimeError):
    """No process on the host's side could be found or entered; the message says why."""


def host_anchor(proc: Path = Path("/proc"), pid: int | None = None) -> int | None:
    """The nearest ancestor of ``pid`` (default: this process) in another mount namespace, or None
    when every ancestor below PID 1 shares this one (the process already runs on the host)."""
    own = pid or os.getpid()
    try:
        mounts = os.readlink(proc / str(own) / "ns" / "mnt")
    except OSError as exc:
        raise HostUnreachableError(f"cannot read the mount namespace of process {own}: {exc}") from exc
    current = own
    for _ in range(64):  # a deeper chain is not a process tree a container runtime makes
        current = _parent(proc, current)
        if current <= 1:
            return None
        try:
            if os.readlink(proc / str(current) / "ns" / "mnt") != mounts:
                return current
        except OSError as exc:
            raise HostUnreachableError(
                f"cannot read the mount namespace of process {current}, an ancestor of {own}: {exc} "
                "(gpu-handler needs the host's PID namespace and privileges to start daemons on the host)"
            ) from exc
    raise HostUnreachableError(f"process {own} has more than 64 ancestors")


def _parent(proc: Path, pid: int) -> int:
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError as exc:
        raise HostUnreachableError(f"cannot read the status of process {pid}: {exc}") from exc
    for line in status.splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise HostUnreachableError(f"process {pid} has no PPid line in its status")


def in_host_namespaces(argv: Sequence[str], anchor: int | None) -> list[str]:
    """``argv`` run in the namespaces of ``anchor`` (:func:`host_anchor`; None: these ones)."""
    if anchor is None:
        return list(argv)
    return ["nsenter", f"--target={anchor}", "--mount", "--uts", "--ipc", "--net", "--", *argv]


def outside_the_pod(argv: Sequence[str], anchor: int | None) -> list[str]:
    """``argv`` run on the host and in its root cgroups, so nothing that stops the Pod stops it."""
    return in_host_namespaces(["sh", "-c", f'{LEAVE_POD_CGROUPS}; exec "$@"', "sh", *argv], anchor)


def host_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a process started on the host: its ``PATH`` and ``extra`` only."""
    return {"PATH": HOST_PATH, **extra}
