"""The simulated sharing tools: the time slice kept in the driver state, and a real MPS daemon.

:class:`SimulatedTimeSlicer` records ``nvidia-smi compute-policy --set-timeslice`` in the card's
simulated driver state, where tests read it back. The MPS control daemon is not simulated in
memory: :func:`simulated_mps_control` is the production
:class:`~pkg.backends.nvidia.sharing.NvidiaMpsControl` running
:mod:`pkg.backends.simulated.mps_daemon`, a real detached process with the daemon's PID file,
control pipe and ``quit`` command, so starting, stopping, dying and being restarted happen for real.
"""

from __future__ import annotations

import sys

from pkg.backends.nvidia.sharing import NvidiaMpsControl, TimeSlice
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
