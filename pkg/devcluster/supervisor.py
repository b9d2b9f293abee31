"""Keeps our component processes running the way a kubelet keeps a Pod's containers running.

On a real cluster gpu-handler, gpu-node-agent and the controllers run in Pods with
``restartPolicy: Always``: a container that exits, or is killed, is started again after the
kubelet's CrashLoopBackOff — 10 s, doubled after every further exit up to 5 minutes, and back to
10 s once the container has run for 10 minutes
(https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-restarts). On the
local cluster they are host processes (:class:`~pkg.devcluster.processes.ManagedProcess`), so this
supervisor plays that part for a long run, and records each restart — when, how the process ended
(exit code or signal) and whether we killed it (:meth:`Supervisor.kill`) or it ended on its own —
so a run can tell a fault it caused from a crash it found.

The policy is :meth:`Supervisor.poll` (pure bookkeeping over a clock, unit-tested); a daemon thread
calls it a few times a second, because a caller's own loop may be busy for a long while (a node
reboot). A process stopped on purpose (a node reboot stops the node's components) is taken out of
supervision first with :meth:`Supervisor.paused`, or it would be started again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pkg.devcluster.processes import ManagedProcess

log = logging.getLogger(__name__)

INITIAL_BACKOFF = 10.0
MAX_BACKOFF = 300.0
RESET_AFTER = 600.0  # seconds up after which the next exit starts from the initial backoff again
_POLL_SECONDS = 0.2
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Restart:
    """One exit of a supervised process and its start again."""

    name: str
    exited_at: float  # the supervisor's clock (time.time by default)
    exit_code: int | None  # None when a signal ended it
    signal: str | None  # e.g. "SIGKILL"
    ours: bool  # ended by Supervisor.kill, not by itself
    delay: float  # the backoff waited before the start again
    started_at: float | None = None  # None while the backoff runs


@dataclass
class _Watched:
    process: ManagedProcess
    backoff: float
    up_since: float
    killed_by_us: bool = False
    exited: Restart | None = None  # waiting for its backoff to pass
    history: list[Restart] = field(default_factory=list)


class Supervisor:
    """Restarts supervised processes that exit, with CrashLoop-style backoff."""

    def __init__(
        self,
        *,
        initial_backoff: float = INITIAL_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        reset_after: float = RESET_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._initial = initial_backoff
        self._max = max_backoff
        self._reset_after = reset_after
        self._clock = clock
        self._watched: dict[str, _Watched] = {}
        self._released: dict[str, _Watched] = {}  # out of supervision for a while (paused)
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- membership ------------------------------------------------------------------------------

    def supervise(self, *processes: ManagedProcess) -> None:
        """Keeps ``processes`` running from now on (each started if it is not running). A process
        supervised again keeps its restart history and backoff."""
        with self._lock:
            for process in processes:
                watched = self._watched.get(process.name)
                if watched is None:
                    watched = _Watched(process=process, backoff=self._initial, up_since=self._clock())
                    self._watched[process.name] = watched
                watched.process = process
                watched.exited = None
                if not process.running():
                    process.start()
                    watched.up_since = self._clock()

    def release(self, name: str) -> ManagedProcess:
        """Stops keeping ``name`` running (it is left as it is); its history stays readable."""
        with self._lock:
            watched = self._watched.pop(name, None)
            if watched is None:
                raise KeyError(f"{name} is not supervised (supervised: {', '.join(self.names) or 'none'})")
            self._released[name] = watched
            return watched.process

    @contextlib.contextmanager
    def paused(self, *names: str) -> Iterator[list[ManagedProcess]]:
        """Takes ``names`` out of supervision for the block (the caller may stop and start them)
        and supervises them again after it, starting any that is not running."""
        processes = [self.release(name) for name in names]
        try:
            yield processes
        finally:
            with self._lock:
                for name in names:
                    self._watched[name] = self._released.pop(name)
                self.supervise(*processes)

    @property
    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._watched)

    # -- what a run does and reads ---------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL to ``name``'s process group, as a crash or an OOM kill; its restart is marked ours."""
        with self._lock:
            watched = self._known(name)
            process = watched.process.process
            if process is None or process.poll() is not None:
                raise RuntimeError(f"{name} is not running; nothing to kill")
            watched.killed_by_us = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    def restarts(self, name: str) -> list[Restart]:
        """Every exit of ``name`` so far, oldest first (the last one may still be in its backoff)."""
        with self._lock:
            watched = self._known(name)
            return [*watched.history, *([watched.exited] if watched.exited else [])]

    def rss_bytes(self, name: str) -> int | None:
        """The resident memory of ``name``'s process now (from /proc); None while it is not running."""
        with self._lock:
            process = self._known(name).process.process
        if process is None or process.poll() is not None:
            return None
        return resident_bytes(Path("/proc", str(process.pid)))

    # -- the policy ------------------------------------------------------------------------------

    def poll(self) -> list[Restart]:
        """Notes the processes that exited and starts those whose backoff has passed; returns the
        restarts done by this call."""
        done = []
        with self._lock:
            now = self._clock()
            for name, watched in self._watched.items():
                if watched.exited is None:
                    code = watched.process.process.poll() if watched.process.process is not None else None
                    if watched.process.process is None or code is None:
                        continue
                    if now - watched.up_since >= self._reset_after:
                        watched.backoff = self._initial
                    watched.exited = Restart(
                        name=name,
                        exited_at=now,
                        exit_code=code if code >= 0 else None,
                        signal=signal.Signals(-code).name if code < 0 else None,
                        ours=watched.killed_by_us,
                        delay=watched.backoff,
                    )
                    watched.killed_by_us = False
                    log.warning("%s exited (%s); starting it again in %.0fs", name, code, watched.backoff)
                if now - watched.exited.exited_at < watched.exited.delay:
                    continue
                watched.process.start()
                restart = dataclasses.replace(watched.exited, started_at=now)
                watched.history.append(restart)
                watched.exited = None
                watched.up_since = now
                watched.backoff = min(watched.backoff * 2, self._max)
                done.append(restart)
        return done

    # -- the thread ------------------------------------------------------------------------------

    def start(self) -> None:
        """Polls in a daemon thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)
        self._thread.start()

    def stop(self, *, processes: bool = True) -> None:
        """Ends the polling, then (``processes``) stops every supervised process, last started first."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if processes:
            with self._lock:
                for watched in reversed(list(self._watched.values())):
                    watched.process.stop()

    def _run(self) -> None:
        while not self._stopping.wait(_POLL_SECONDS):
            try:
                self.poll()
            except Exception:  # one failed start must not end the supervision of the others
                log.exception("supervisor poll failed")

    def _known(self, name: str) -> _Watched:
        watched = self._watched.get(name) or self._released.get(name)
        if watched is None:
            raise KeyError(
                f"{name} is not supervised (supervised: {', '.join(sorted(self._watched)) or 'none'})"
            )
        return watched


def resident_bytes(proc_dir: Path) -> int | None:
    """A process's resident set size from ``<proc_dir>/statm`` (pages, second field); None when
    the process is gone."""
    try:
        fields = (proc_dir / "statm").read_text().split()
    except OSError:
        return None
    return int(fields[1]) * _PAGE
