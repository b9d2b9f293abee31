"""Running our binaries as processes against the test control plane, and waiting on the API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T | Literal[False] | None], *, timeout: float = 30.0, what: str) -> T:
    """Polls ``probe`` until it returns something truthy; fails naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T | Literal[False] | None = None
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


# How a refused request shows in a component's log: the API server's reason (our ApiError reads
# "403 Forbidden: …") or an admission policy's "denied request". Not a bare "403": ports, byte counts
# and durations contain it.
REFUSAL = re.compile(r"forbidden|denied request", re.IGNORECASE)


def refused_requests(log_path: Path) -> list[str]:
    """The lines of a component's log that record a request the API server refused."""
    return [line for line in log_path.read_text().splitlines() if REFUSAL.search(line)]


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@contextmanager
def node_components(
    kubeconfig: str,
    node: str,
    *,
    root: Path,
    state: Path,
    logs: Path,
    metrics_port: int | None = None,
    handler_args: Sequence[str] = (),
) -> Iterator[None]:
    """gpu-node-agent and gpu-handler (simulated backend) for one node on a fixture host, with
    1 s resyncs; the handler must still be running when the block ends. No kubelet runs in this
    tier, so the handler serves no kubelet plugin (the e2e tier tests it with a real kubelet)."""
    from pkg.devcluster.processes import free_port

    agent = [
        f"--node-name={node}", f"--sysfs-root={root}", f"--host-root={root}",
        f"--pci-ids={FIXTURES / 'pci.ids'}", "--resync-period=1s", f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}", "--udev=false",
    ]  # fmt: skip
    handler = [
        f"--node-name={node}", "--backend=simulated-nvidia", f"--sysfs-root={root}",
        f"--sim-state-dir={state}", "--enrich-period=1s", "--kubelet-plugin=false", *handler_args,
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port or free_port()}",
    ]  # fmt: skip
    with (
        running("pkg.app.gpu_node_agent", agent, log_path=logs / "agent.log"),
        running("pkg.app.gpu_handler", handler, log_path=logs / "handler.log") as proc,
    ):
        yield
        assert proc.poll() is None, (logs / "handler.log").read_text()[-3000:]
