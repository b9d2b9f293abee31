"""The simulated sharing tools: the time slice kept in the driver state, and a real MPS daemon.

:class:`SimulatedTimeSlicer` records ``nvidia-smi compute-policy --set-timeslice`` in the card's
simulated driver state, where tests read it back. The MPS control daemon is not simulated in
memory: :func:`simulated_mps_control` is the production
:class:`~pkg.backends.nvidia.sharing.NvidiaMpsControl` running
:mod:`pkg.backends.simulated.mps_daemon`, a real detached process with the daemon's PID file,
control pipe and ``quit`` command, so starting, stopping, dying and being restarted happen for real.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from pkg.backends.nvidia.sharing import PID_FILE, NvidiaMpsControl, TimeSlice, daemon_pid, stop_process
from pkg.backends.simulated import mps_daemon
from pkg.backends.simulated.driver_state import CardState, SimulatedDriverState


class SimulatedTimeSlicer:
    def __init__(self, state: SimulatedDriverState) -> None:
        self._state = state

    def set_time_slice(self, *, address: str, uuid: str, interval: TimeSlice) -> None:
        def change(card: CardState) -> None:
            card.time_slice = int(interval)

        self._state.change(address, change)


def simulated_mps_control(*, timeout: float = 10.0) -> NvidiaMpsControl:
    return NvidiaMpsControl(command=(sys.executable, "-m", mps_daemon.MARKER), timeout=timeout)


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
