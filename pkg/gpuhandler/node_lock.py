"""One lock for everything that changes this node's GPU state: prepares, unprepares, start-up,
and the publishing of its ResourceSlices.

Two gpu-handler instances run side by side during a rolling update (maxSurge 1), and the kubelet
may call both; the checkpoint, the CDI folder, the cards themselves and the node's slice pool are
shared, so every change holds an exclusive ``flock`` on one file beside the checkpoint. (Two
publishes at once could give two different pool contents one generation; under the lock the second
reads the first's slices and writes the next generation.) flock is released by the kernel when its
holder dies, so a crashed instance never leaves the node locked. Waiting is bounded: a prepare
that cannot get the lock in time fails with an error naming the lock, and the kubelet retries.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


class NodeLockTimeoutError(TimeoutError):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__(f"node lock {path} is held by another prepare/unprepare for more than {timeout:g}s")
        self.path = path


@contextlib.contextmanager
def node_lock(path: Path, *, timeout: float, poll: float = 0.01) -> Iterator[None]:
    """Holds the exclusive lock on ``path`` for the ``with`` block, waiting at most ``timeout``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        pause = poll
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    raise NodeLockTimeoutError(path, timeout) from exc
                time.sleep(pause)
                pause = min(pause * 2, 0.2)
        yield
    finally:
        os.close(fd)  # closing releases the lock
