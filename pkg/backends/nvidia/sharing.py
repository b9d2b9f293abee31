"""Sharing a whole NVIDIA card: the time slice of its scheduler, and its MPS control daemon.

Two narrow ports, each with the real tool behind it here and a simulated one in
:mod:`pkg.backends.simulated.sharing`:

* :class:`TimeSlicer` — ``nvidia-smi compute-policy -i <uuid> --set-timeslice=<0..3>`` (default,
  short, medium, long): how long each process runs before the card switches to the next. It is a
  card-wide setting, which is why every TimeSlicing share of one card must ask for the same one.
* :class:`MpsControl` — ``nvidia-cuda-mps-control -d``, the MPS control daemon of one card
  (``CUDA_VISIBLE_DEVICES=<uuid>``) in its own folders (:class:`~pkg.backends.preparation.MpsFolders`).
  It writes its PID to ``<pipe>/nvidia-cuda-mps-control.pid`` and stops when ``quit`` is written to
  ``nvidia-cuda-mps-control`` run against the same pipe folder. The server it starts and its
  clients share memory through ``/dev/shm``, so the daemon runs in a mount namespace of its own
  whose ``/dev/shm`` is the card's ``shm`` folder, the folder every client gets at ``/dev/shm``.
  In a Pod the daemon is started on the host, outside the Pod's cgroups, because its clients
  outlive any one gpu-handler container (:mod:`pkg.backends.host_daemons`).

What MPS isolates and what it does not: each client's share of the card's threads
(``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``) and its pinned memory (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``)
are enforced by the MPS server; a fatal fault in one client (an illegal memory access) takes down
the server and every client of the card with it, and clients are not protected from reading each
other's timing. Time slicing enforces nothing but turns.

Not proven here (no hardware): the real tools' behaviour; the simulated ones follow the documented
contract (PID file, ``quit``), and the lifecycle around them is tested with real processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from enum import IntEnum
from pathlib import Path
from typing import Final, Protocol

from api.gpu.v1alpha1 import TimeSlicingInterval
from pkg.backends.host_daemons import (
    HostUnreachableError,
    host_anchor,
    host_environment,
    in_host_namespaces,
    outside_the_pod,
)
from pkg.backends.preparation import MpsFolders

PID_FILE: Final = "nvidia-cuda-mps-control.pid"
CONTROL_BINARY: Final = "nvidia-cuda-mps-control"


class TimeSlice(IntEnum):
    """``nvidia-smi compute-policy --set-timeslice`` values."""

    DEFAULT = 0
    SHORT = 1
    MEDIUM = 2
    LONG = 3

    @classmethod
    def of(cls, interval: TimeSlicingInterval) -> TimeSlice:
        return cls[interval.name]


class SharingToolError(RuntimeError):
    """A sharing tool failed; the message says which command and why."""


class TimeSlicer(Protocol):
    def set_time_slice(self, *, address: str, uuid: str, interval: TimeSlice) -> None: ...


class MpsControl(Protocol):
    def start(self, *, uuid: str, folders: MpsFolders) -> None:
        """Starts the card's control daemon in ``folders``; returns once its PID file names it."""
        ...

    def quit(self, *, folders: MpsFolders) -> None:
        """Asks the daemon to stop and waits until it has (killing it after a bounded wait)."""
        ...

    def running(self, *, folders: MpsFolders) -> bool: ...


class NvidiaSmiTimeSlicer:
    def __init__(self, *, binary: str = "nvidia-smi", timeout: float = 30.0) -> None:
        self._binary = binary
        self._timeout = timeout

    def set_time_slice(self, *, address: str, uuid: str, interval: TimeSlice) -> None:
        command = [self._binary, "compute-policy", "-i", uuid, f"--set-timeslice={int(interval)}"]
        run_tool(command, timeout=self._timeout)


class NvidiaMpsControl:
    """``nvidia-cuda-mps-control`` (or a stand-in ``command`` that keeps its contract), started
    with ``unshare`` so that its ``/dev/shm`` is the card's shared-memory folder.

    ``marker`` identifies the daemon in ``/proc/<pid>/cmdline`` (default: the last word of
    ``command``). ``on_host``: the daemon is started on the host, outside this container's cgroups
    (:mod:`pkg.backends.host_daemons`), so it outlives the container; ``command`` is then a command
    of the host, and the caller must be in the host's PID namespace.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] = (CONTROL_BINARY,),
        marker: str | None = None,
        on_host: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self._command = list(command)
        self._marker = (marker or Path(self._command[-1]).name).encode()
        self._on_host = on_host
        self._timeout = timeout

    def start(self, *, uuid: str, folders: MpsFolders) -> None:
        script = 'mount --bind "$1" /dev/shm && shift && exec "$@" -d'
        isolate = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]
        argv = [*isolate, str(folders.shm), *self._command]
        launch, env = self._placed(argv, daemon_environment(uuid=uuid, folders=folders), daemon=True)
        run_tool(launch, env=env, timeout=self._timeout)
        what = f"the MPS control daemon in {folders.pipe} to write its PID file"
        try:
            wait_for(lambda: self.running(folders=folders), timeout=self._timeout, what=what)
        except TimeoutError as exc:
            raise SharingToolError(str(exc)) from None

    def quit(self, *, folders: MpsFolders) -> None:
        pid = daemon_pid(folders.pipe, self._marker)
        if pid is None:
            return
        client, env = self._placed(
            self._command, {"CUDA_MPS_PIPE_DIRECTORY": str(folders.pipe)}, daemon=False
        )
        with contextlib.suppress(SharingToolError):  # a daemon that cannot be asked is killed below
            run_tool(client, env=env, timeout=self._timeout, input_text="quit\n")
        stop_process(pid, marker=self._marker, timeout=self._timeout)

    def running(self, *, folders: MpsFolders) -> bool:
        return daemon_pid(folders.pipe, self._marker) is not None

    def _placed(
        self, argv: Sequence[str], env: dict[str, str], *, daemon: bool
    ) -> tuple[list[str], dict[str, str]]:
        """``argv`` and its environment to run here, or on the host (``on_host``), a ``daemon``
        also outside the Pod's cgroups; the host's tools see none of this container's environment."""
        if not self._on_host:
            return list(argv), {**os.environ, **env}
        try:
            anchor = host_anchor()
        except HostUnreachableError as exc:
            raise SharingToolError(str(exc)) from exc
        placed = outside_the_pod(argv, anchor) if daemon else in_host_namespaces(argv, anchor)
        return placed, host_environment(env)


def daemon_environment(*, uuid: str, folders: MpsFolders) -> dict[str, str]:
    return {
        "CUDA_VISIBLE_DEVICES": uuid,
        "CUDA_MPS_PIPE_DIRECTORY": str(folders.pipe),
        "CUDA_MPS_LOG_DIRECTORY": str(folders.log),
    }


def daemon_pid(pipe_dir: Path, marker: bytes) -> int | None:
    """The PID in ``pipe_dir``'s PID file if that process lives and is the daemon.

    ``marker`` must occur in its command line: a PID file left by a daemon that died names a
    number the kernel may since have given to an unrelated process.
    """
    try:
        pid = int((pipe_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid, marker) else None


def process_alive(pid: int, marker: bytes) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state != "Z" and marker in cmdline


def stop_process(pid: int, *, marker: bytes, timeout: float) -> None:
    """Waits up to ``timeout`` for the daemon ``pid`` to exit, then kills it; returns once it is gone."""

    def gone() -> bool:
        return not process_alive(pid, marker)

    try:
        wait_for(gone, timeout=timeout, what=f"process {pid} to exit")
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        try:
            wait_for(gone, timeout=5.0, what=f"process {pid} to die after SIGKILL")
        except TimeoutError as exc:
            raise SharingToolError(str(exc)) from None


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Polls ``condition`` with a growing pause (5 ms doubling to 200 ms) until true or ``timeout``."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while not condition():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"gave up waiting {timeout:g}s for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def run_tool(
    command: list[str], *, timeout: float, env: dict[str, str] | None = None, input_text: str | None = None
) -> None:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, input=input_text, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SharingToolError(f"{' '.join(command)}: {exc}") from exc
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()[:500]
        raise SharingToolError(f"{' '.join(command)} exited with {result.returncode}: {detail}")
