"""What the processes on a card use of it: the backend port's answer for per-Pod attribution.

One :class:`CardUsage` is one read of one card by the vendor library, taken once per sampling
interval by gpu-handler's attribution (:mod:`pkg.gpuhandler.attribution`), which maps each PID to
its container. Process IDs are those of the PID namespace the library reports in (the host's:
gpu-handler runs with ``hostPID``). A figure the library does not offer here is ``None``, never
0: "not sampled" and "idle" are different answers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ProcessUsage:
    """One process on the card; ``device_uuid`` is the card's UUID, or its partition's (a MIG
    device) when the process runs in one."""

    pid: int
    device_uuid: str
    memory_bytes: int | None
    sm_percent: int | None


@dataclass(frozen=True, kw_only=True)
class CardUsage:
    """One card's processes and its energy counter (millijoules since the driver loaded; ``None``
    where the card reports none)."""

    address: str
    uuid: str
    energy_mj: int | None
    processes: tuple[ProcessUsage, ...]
