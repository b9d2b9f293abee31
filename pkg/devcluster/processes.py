"""Child processes of the local control plane, each with its own log file.

Processes are started in their own session so that a stop signal reaches the whole process group,
and they are terminated (SIGTERM, then SIGKILL after a grace period) in reverse start order so the
apiserver never outlives etcd by accident. Logs go to files because tests keep them only when they
fail, and because an unread pipe would block a chatty child.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


def free_port() -> int:
    """A loopback port that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ManagedProcess:
    """One component process: its command line, log file and live handle."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.running():
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log_file:
            log_file.write(f"--- start {' '.join(self.argv)}\n".encode())
            log_file.flush()
            self.process = subprocess.Popen(
                list(self.argv),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        log.debug("started %s (pid %s)", self.name, self.process.pid)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, *, grace: float = 10.0, sig: signal.Signals = signal.SIGTERM) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=grace)

    def kill(self) -> None:
        """Stops the process without a grace period, as a crash would."""
        self.stop(grace=5.0, sig=signal.SIGKILL)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def wait_until(
    check: Callable[[], bool], *, timeout: float, what: str, process: ManagedProcess | None = None
) -> None:
    """Polls ``check`` with growing pauses; fails naming ``what`` and showing the process log."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while time.monotonic() < deadline:
        if process is not None and process.process is not None and not process.running():
            raise RuntimeError(
                f"{process.name} exited with {process.process.returncode} while waiting for {what}:\n"
                f"{process.tail()}"
            )
        try:
            if check():
                return
        except Exception as exc:  # any failure of a probe means "not yet"
            log.debug("waiting for %s: %s", what, exc)
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
    detail = f"\n{process.tail()}" if process is not None else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")


def ready(port: int) -> bool:
    """Whether a component on this machine answers ``/readyz`` on ``port`` with 200."""
    try:
        return bool(urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200)
    except OSError:
        return False
