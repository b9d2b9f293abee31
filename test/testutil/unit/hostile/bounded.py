"""Run one test case in a child process with bounded CPU time, memory and wall-clock time.

Why a child: the failures this suite looks for are the ones a process cannot survive or report —
a C++ ``std::bad_alloc`` after gigabytes, a read that blocks forever on a FIFO, a parse that runs
for minutes. In the child they become a clear test failure ("killed: CPU limit", "no answer
within 30 s") while pytest goes on. The child is a ``fork`` of the test process, so it costs a few
milliseconds and needs nothing pickled but the answer.

Bounds per case: :data:`MEMORY_BYTES` of address space beyond what the test process already maps
(``RLIMIT_AS``), :data:`CPU_SECONDS` of CPU (``RLIMIT_CPU``, immune to a busy machine), and
:data:`WALL_SECONDS` of wall-clock time, generous, only to catch a hang that uses no CPU. These are
failure bounds, not speed targets: a correct case finishes far below them.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

MEMORY_BYTES = 1 << 30
CPU_SECONDS = 10
WALL_SECONDS = 30.0

_T = TypeVar("_T")


class BoundedCaseError(AssertionError):
    """The case broke a bound, crashed, or raised; the message says which and shows the input."""


def _mapped_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def run_bounded(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)`` in a bounded child; its return value, or :class:`BoundedCaseError`."""
    limit = _mapped_bytes() + MEMORY_BYTES
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0
        try:
            os.close(read_end)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 1))
            try:
                answer: tuple[str, Any] = ("ok", fn(*args, **kwargs))
            except BaseException as exc:  # everything, MemoryError included, is the answer
                answer = (
                    "raised",
                    f"{type(exc).__name__}: {exc}"[:4000] + "\n" + traceback.format_exc()[-4000:],
                )
            try:
                data = pickle.dumps(answer)
            except Exception as exc:
                data = pickle.dumps(("raised", f"unpicklable answer {answer!r:.200}: {exc}"))
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        except BaseException:
            status = 70
        finally:
            os._exit(status)
    os.close(write_end)
    result: _T = _collect(pid, read_end, fn)
    return result


def _collect(pid: int, read_end: int, fn: Callable[..., Any]) -> Any:
    chunks: list[bytes] = []
    deadline = time.monotonic() + WALL_SECONDS
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise BoundedCaseError(f"{fn.__name__}: no answer within {WALL_SECONDS:g} s (a hang)")
            ready, _, _ = select.select([read_end], [], [], remaining)
            if ready:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        why = {"SIGXCPU": f"over {CPU_SECONDS} s of CPU", "SIGKILL": "killed (out of memory?)"}.get(sig, sig)
        raise BoundedCaseError(f"{fn.__name__}: the case died: {why}")
    if not chunks:
        raise BoundedCaseError(
            f"{fn.__name__}: the case gave no answer (exit status {os.WEXITSTATUS(status)})"
        )
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "raised":
        raise BoundedCaseError(f"{fn.__name__} raised {value}")
    return value
