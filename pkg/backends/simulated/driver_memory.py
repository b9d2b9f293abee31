"""What the simulated NVIDIA driver remembers: MIG mode, GPU and compute instances, processes.

A real driver keeps this state in the kernel, shared by every process on the node, and it
survives the death of the process that made a change. The simulation keeps it in one JSON file
per node (``<state-dir>/driver.json``) changed only under an exclusive ``flock``, so that two
gpu-handler instances, a test and a crashed-and-restarted process all see and change the same
cards, and a kill -9 mid-change leaves the previous state (the file is replaced atomically).
Without a state folder (unit tests, the offline view) the state lives in memory.

Cards start with MIG disabled unless listed in ``mig_enabled``, in the default compute mode and
time slice; processes exist only when a test puts them there
(:meth:`SimulatedDriverMemory.set_processes`), standing in for a CUDA program that keeps a card busy.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")
STATE_FILE: Final = "driver.json"
LOCK_FILE: Final = "driver.lock"
EVENTS_FILE: Final = "events.jsonl"


class ComputeInstanceRecord(BaseModel):
    id: int
    profile_id: int


class GpuInstanceRecord(BaseModel):
    id: int
    profile_id: int
    start: int
    size: int
    compute_instances: list[ComputeInstanceRecord] = Field(default_factory=list)


class CardRecord(BaseModel):
    mig_mode: int
    gpu_instances: list[GpuInstanceRecord] = Field(default_factory=list)
    processes: list[int] = Field(default_factory=list)
    compute_mode: int = 0  # NVML_COMPUTEMODE_DEFAULT
    time_slice: int = 0  # nvidia-smi compute-policy --set-timeslice: 0 default .. 3 long
    reset_pending: bool = False  # an injected fault awaits a GPU reset (:mod:`.events`)

    def gpu_instance(self, gpu_instance: int) -> GpuInstanceRecord | None:
        return next((gi for gi in self.gpu_instances if gi.id == gpu_instance), None)


class DriverRecord(BaseModel):
    cards: dict[str, CardRecord] = Field(default_factory=dict)


class SimulatedDriverMemory:
    """The node's driver state; every method is atomic across threads and processes."""

    def __init__(self, state_dir: Path | None = None, *, mig_enabled: Iterable[str] = ()) -> None:
        self._dir = state_dir
        self._mig_enabled = frozenset(mig_enabled)
        self._memory = DriverRecord()
        self._events: list[str] = []  # the event log without a state folder
        self._thread_lock = threading.Lock()

    def card(self, address: str) -> CardRecord:
        """A copy of the card's state (changes to it are not kept)."""
        return self.change(address, lambda card: card.model_copy(deep=True), write=False)

    def change(self, address: str, fn: Callable[[CardRecord], T], *, write: bool = True) -> T:
        """Runs ``fn`` on the card's state under the lock and keeps what it changed."""
        with self._locked() as state:
            card = state.cards.get(address)
            if card is None:
                card = CardRecord(mig_mode=1 if address in self._mig_enabled else 0)
                state.cards[address] = card
            result = fn(card)
            if write:
                self._save(state)
            return result

    def set_processes(self, address: str, pids: Iterable[int]) -> None:
        """Test hook: processes that now run on the card (an empty list: it is idle again)."""

        def put(card: CardRecord) -> None:
            card.processes = sorted(set(pids))

        self.change(address, put)

    def append_event(self, record: dict[str, Any]) -> None:
        """Adds one event to the node's event log (one JSON line), under the state's lock."""
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._locked():
            if self._dir is None:
                self._events.append(line)
                return
            with (self._dir / EVENTS_FILE).open("a") as log:
                log.write(line)

    def events_after(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        """The events logged after ``offset`` (a position :meth:`events_end` or this returned)."""
        if self._dir is None:
            with self._thread_lock:
                lines = self._events[offset:]
                return [json.loads(line) for line in lines], offset + len(lines)
        try:
            with (self._dir / EVENTS_FILE).open("rb") as log:
                log.seek(offset)
                data = log.read()
        except FileNotFoundError:
            return [], offset
        complete = data[: data.rfind(b"\n") + 1]  # a line being written waits for the next read
        records = [json.loads(line) for line in complete.decode().splitlines() if line.strip()]
        return records, offset + len(complete)

    def events_end(self) -> int:
        """Where the event log ends now: a new event set sees only what comes after."""
        if self._dir is None:
            with self._thread_lock:
                return len(self._events)
        try:
            return (self._dir / EVENTS_FILE).stat().st_size
        except FileNotFoundError:
            return 0

    @contextlib.contextmanager
    def _locked(self) -> Iterator[DriverRecord]:
        with self._thread_lock:
            if self._dir is None:
                yield self._memory
                return
            self._dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield self._load()
            finally:
                os.close(fd)

    def _load(self) -> DriverRecord:
        assert self._dir is not None
        try:
            raw: Any = json.loads((self._dir / STATE_FILE).read_text())
        except FileNotFoundError:
            return DriverRecord()
        return DriverRecord.model_validate(raw)

    def _save(self, state: DriverRecord) -> None:
        if self._dir is None:
            return
        target = self._dir / STATE_FILE
        temporary = target.with_name(f".{STATE_FILE}.tmp")
        temporary.write_text(state.model_dump_json(indent=1))
        os.replace(temporary, target)
