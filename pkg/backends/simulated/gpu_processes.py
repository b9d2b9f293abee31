"""Which real processes use a simulated card, found the way the real driver knows them.

The real driver lists a process on a card because it opened the card's device node and made a
context there. The simulated card's device node is a stand-in (``/dev/nvidia<minor>`` made with
mknod), so a process "uses" a simulated card when it holds that node open — a container given the
card by our CDI spec does so with ``exec 3</dev/nvidia0`` — and its environment names the card or one
of its MIG devices in ``NVIDIA_VISIBLE_DEVICES`` (which our CDI spec sets). The environment is
what tells the cards of two simulated nodes on one machine apart: their minor numbers repeat, but
their UUIDs differ.

What a real program would make the driver report, a simulated one declares in its environment:
``SIMULATED_GPU_MEMORY_MIB`` (GPU memory held; default 0) and ``SIMULATED_GPU_SM_PERCENT`` (its
share of the card's SMs; default 0). So the e2e tier checks attribution on real PIDs of real
containers, with figures it chose.

The scan reads ``<proc>/<pid>/environ`` and ``<proc>/<pid>/fd`` of every process, each read
bounded; a process that ends or hides its files during the scan is skipped. One scan serves every
card for :data:`SCAN_TTL_SECONDS`, so a pass over eight cards reads ``/proc`` once.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
MEMORY_MIB: Final = "SIMULATED_GPU_MEMORY_MIB"
SM_PERCENT: Final = "SIMULATED_GPU_SM_PERCENT"
SCAN_TTL_SECONDS: Final = 1.0
_MAX_ENVIRON: Final = 64 << 10
_MAX_FDS: Final = 4096
_CARD_NODE = re.compile(r"^/dev/nvidia(\d+)$")


@dataclass(frozen=True, kw_only=True)
class GpuProcess:
    """A process holding a simulated card's node open, with what its environment declares."""

    pid: int
    minors: frozenset[int]
    visible: frozenset[str]  # the UUIDs in NVIDIA_VISIBLE_DEVICES
    memory_bytes: int
    sm_percent: int


class GpuProcessScan:
    """The processes of ``proc`` (a ``/proc`` of the PID namespace NVML's PIDs belong to)."""

    def __init__(self, proc: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._proc = proc
        self._clock = clock
        self._lock = threading.Lock()
        self._taken: float | None = None
        self._found: tuple[GpuProcess, ...] = ()

    def processes(self) -> tuple[GpuProcess, ...]:
        with self._lock:
            now = self._clock()
            if self._taken is None or now - self._taken >= SCAN_TTL_SECONDS:
                self._found = tuple(self._scan())
                self._taken = now
            return self._found

    def on_card(self, *, minor: int, uuids: frozenset[str]) -> list[GpuProcess]:
        """Processes that hold ``/dev/nvidia<minor>`` open and see one of ``uuids``."""
        return [p for p in self.processes() if minor in p.minors and p.visible & uuids]

    def _scan(self) -> list[GpuProcess]:
        found = []
        try:
            entries = list(os.scandir(self._proc))
        except OSError:
            return []
        for entry in entries:
            if not entry.name.isdigit():
                continue
            process = _read(Path(entry.path), int(entry.name))
            if process is not None:
                found.append(process)
        return found


def _read(folder: Path, pid: int) -> GpuProcess | None:
    environ = _environ(folder / "environ")
    if environ is None or VISIBLE_DEVICES not in environ:
        return None
    minors = _open_card_nodes(folder / "fd")
    if not minors:
        return None
    visible = frozenset(v.strip() for v in environ[VISIBLE_DEVICES].split(",") if v.strip())
    return GpuProcess(
        pid=pid,
        minors=minors,
        visible=visible,
        memory_bytes=_number(environ.get(MEMORY_MIB)) * 1024 * 1024,
        sm_percent=min(100, _number(environ.get(SM_PERCENT))),
    )


def _environ(path: Path) -> dict[str, str] | None:
    try:
        with path.open("rb") as file:
            data = file.read(_MAX_ENVIRON)
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in data.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def _open_card_nodes(fd_folder: Path) -> frozenset[int]:
    minors = set()
    try:
        with os.scandir(fd_folder) as fds:
            for count, fd in enumerate(fds):
                if count >= _MAX_FDS:
                    break
                try:
                    match = _CARD_NODE.match(os.readlink(fd.path))
                except OSError:
                    continue
                if match is not None:
                    minors.add(int(match.group(1)))
    except OSError:
        return frozenset()
    return frozenset(minors)


def _number(text: str | None) -> int:
    try:
        return max(0, int(text)) if text is not None else 0
    except ValueError:
        return 0
