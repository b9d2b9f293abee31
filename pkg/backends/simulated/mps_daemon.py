"""A stand-in for ``nvidia-cuda-mps-control``: a real daemon process that keeps its contract.

Run as ``python -m pkg.backends.simulated.mps_daemon`` with the daemon's environment
(``CUDA_VISIBLE_DEVICES``, ``CUDA_MPS_PIPE_DIRECTORY``, ``CUDA_MPS_LOG_DIRECTORY``):

* ``-d`` starts the control daemon in the background, as the real one does: it detaches (double
  fork, own session), writes its PID to ``<pipe>/nvidia-cuda-mps-control.pid``, creates its control
  pipe ``<pipe>/control`` and a file in ``/dev/shm`` naming the card (standing in for the shared
  memory of the MPS server, so a client can see that its ``/dev/shm`` is the daemon's), logs to
  ``<log>/control.log``; the starting process exits once the PID file is written. A second daemon
  in the same pipe folder refuses to start, as the real one does.
* Without ``-d`` it is the control client: each line of its input is a command sent to the daemon
  of ``CUDA_MPS_PIPE_DIRECTORY`` through the control pipe. ``quit`` stops the daemon, which
  removes its PID file, pipe and shared-memory file first. A daemon that is not running is an
  error (exit 1).

SIGTERM stops the daemon the same way; SIGKILL leaves its files behind, as it would the real
one's, which is why the PID in a PID file is only believed while that process lives.

Standard library only: it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Final, NoReturn

PID_FILE: Final = "nvidia-cuda-mps-control.pid"  # as pkg.backends.nvidia.sharing.PID_FILE
CONTROL_PIPE: Final = "control"
LOG_FILE: Final = "control.log"
SHM: Final = Path("/dev/shm")
SHM_FILE: Final = "sim-mps-server"
MARKER: Final = "pkg.backends.simulated.mps_daemon"


def main(argv: list[str]) -> int:
    pipe_dir = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"))
    if argv[1:] == ["-d"]:
        return _start(pipe_dir)
    if argv[1:]:
        print(f"usage: {argv[0]} [-d]", file=sys.stderr)
        return 2
    return _client(pipe_dir, sys.stdin.read().splitlines())


def _start(pipe_dir: Path) -> int:
    if _running(pipe_dir):
        print(f"An instance of this daemon is already running in {pipe_dir}", file=sys.stderr)
        return 1
    ready_read, ready_write = os.pipe()
    if os.fork() > 0:  # the starting process: wait for the daemon's word, then exit
        os.close(ready_write)
        with os.fdopen(ready_read, "rb") as ready:
            word = ready.read()
        if word != b"ok":
            print(f"the MPS control daemon did not start: {word.decode(errors='replace')}", file=sys.stderr)
            return 1
        return 0
    os.close(ready_read)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    try:
        control = _become_daemon(pipe_dir)
    except OSError as exc:
        os.write(ready_write, str(exc).encode())
        os._exit(1)
    os.write(ready_write, b"ok")
    os.close(ready_write)
    return _serve(pipe_dir, control)


def _become_daemon(pipe_dir: Path) -> int:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.chdir("/")
    fifo = pipe_dir / CONTROL_PIPE
    with contextlib.suppress(FileNotFoundError):
        fifo.unlink()
    os.mkfifo(fifo, 0o600)
    control = os.open(fifo, os.O_RDWR)  # read-write: never sees end-of-file between clients
    uuid = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    with contextlib.suppress(OSError):
        (SHM / SHM_FILE).write_text(f"{uuid}\n")
    temporary = pipe_dir / f".{PID_FILE}.tmp"
    temporary.write_text(f"{os.getpid()}\n")
    temporary.rename(pipe_dir / PID_FILE)
    _log(f"started for {uuid or 'all devices'}")
    signal.signal(signal.SIGTERM, _on_term(pipe_dir))
    return control


def _serve(pipe_dir: Path, control: int) -> NoReturn:
    pending = b""
    while True:
        try:
            chunk = os.read(control, 4096)
        except InterruptedError:
            continue
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            command = line.decode(errors="replace").strip()
            if command:
                _log(f"command: {command}")
            if command == "quit":
                _stop(pipe_dir)


def _on_term(pipe_dir: Path) -> Callable[[int, FrameType | None], None]:
    def handle(_signum: int, _frame: FrameType | None) -> None:
        _stop(pipe_dir)

    return handle


def _stop(pipe_dir: Path) -> NoReturn:
    for path in (pipe_dir / PID_FILE, pipe_dir / CONTROL_PIPE, SHM / SHM_FILE):
        with contextlib.suppress(OSError):
            path.unlink()
    _log("stopped")
    os._exit(0)


def _log(message: str) -> None:
    folder = Path(os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with contextlib.suppress(OSError), (folder / LOG_FILE).open("a") as log:
        log.write(f"[{stamp}] {message}\n")


def _running(pipe_dir: Path) -> bool:
    try:
        pid = int((pipe_dir / PID_FILE).read_text().strip())
        return MARKER.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False


def _client(pipe_dir: Path, commands: list[str]) -> int:
    try:
        fd = os.open(pipe_dir / CONTROL_PIPE, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENXIO):
            print(f"Cannot find MPS control daemon process in {pipe_dir}", file=sys.stderr)
            return 1
        raise
    with os.fdopen(fd, "wb") as pipe:
        for command in commands:
            pipe.write(f"{command}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
