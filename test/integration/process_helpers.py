"""Running our binaries as processes against the test control plane, and waiting on the API."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], *, timeout: float = 30.0, what: str) -> T:
    """Polls ``probe`` until it returns something truthy; fails naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


@contextmanager
def running(
    module: str, args: Sequence[str], *, log_path: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Runs ``python -m module args`` until the block ends, then SIGTERMs it and checks it stopped."""
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(
                    f"{module} did not stop on SIGTERM:\n{log_path.read_text()[-3000:]}"
                ) from None
