"""The simulated sharing tools: the time slice kept in the driver state, and a real MPS daemon.

:class:`SimulatedTimeSlicer` records ``nvidia-smi compute-policy --set-timeslice`` in the card's
simulated driver state, where tests read it back. The MPS control daemon is not simulated in
memory: :func:`simulated_mps_control` is the production
:class:`~pkg.backends.nvidia.sharing.NvidiaMpsControl` running
:mod:`pkg.backends.simulated.mps_daemon`, a real detached process with the daemon's PID file,
control pipe and ``quit`` command, so starting, stopping, dying and being restarted happen for real.
gpu-handler in a Pod starts it on the host (``on_host``), through the script a simulated host
keeps in its state folder (:func:`host_tool`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from pkg.backends.nvidia.sharing import (
    CONTROL_BINARY,
    PID_FILE,
    NvidiaMpsControl,
    TimeSlice,
    daemon_pid,
    stop_process,
)
from pkg.backends.simulated import mps_daemon
from pkg.backends.simulated.driver_memory import CardRecord, SimulatedDriverMemory


class SimulatedTimeSlicer:
    def __init__(self, state: SimulatedDriverMemory) -> None:
        self._state = state

    def set_time_slice(self, *, address: str, uuid: str, interval: TimeSlice) -> None:
        def change(card: CardRecord) -> None:
            card.time_slice = int(interval)

        self._state.change(address, change)


def simulated_mps_control(
    *, state_dir: Path | None = None, on_host: bool = False, timeout: float = 10.0
) -> NvidiaMpsControl:
    """The stand-in daemon run by this interpreter, or on the host (``on_host``) the simulated
    driver's tool in ``state_dir`` (:func:`host_tool`), as a real host has the driver's."""
    if not on_host:
        return NvidiaMpsControl(command=(sys.executable, "-m", mps_daemon.MARKER), timeout=timeout)
    if state_dir is None:
        raise ValueError("the simulated backend starts its MPS daemons on the host only with a state folder")
    return NvidiaMpsControl(
        command=(str(host_tool(state_dir)),), marker=mps_daemon.MARKER, on_host=True, timeout=timeout
    )


def host_tool(state_dir: Path) -> Path:
    """Where a simulated host keeps the stand-in of ``nvidia-cuda-mps-control``: a script that
    runs :mod:`~pkg.backends.simulated.mps_daemon` with an interpreter of the host that has this
    project (``pkg.devcluster.gpuhost`` installs it), as a real host has the driver's tool."""
    return state_dir / "bin" / CONTROL_BINARY


def stop_simulated_daemons(root: Path, *, timeout: float = 5.0) -> list[int]:
    """Stops every simulated MPS daemon whose PID file lies under ``root``; returns their PIDs.

    The simulated daemons detach, as the real ones do, so they outlive a test or a local cluster
    node that did not unprepare its shares; whoever removes the node's folders stops them first.
    """
    stopped = []
    marker = mps_daemon.MARKER.encode()
    for pid_file in sorted(root.rglob(PID_FILE)) if root.is_dir() else []:
        pid = daemon_pid(pid_file.parent, marker)
        if pid is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        stop_process(pid, marker=marker, timeout=timeout)
        stopped.append(pid)
    return stopped
