"""A local control plane for the comparison benchmarks, and reading Prometheus metrics.

The scheduler's figures come from its own ``/metrics`` (the histograms its CI reads), so the
scheduler gets a metrics port here (``--secure-port``, a self-signed serving certificate, and
``/metrics`` allowed without credentials on this loopback-only port). Our processes' figures come
from their metrics too, and the API server's from its audit log, never from counters of the
bench itself.
"""

from __future__ import annotations

import contextlib
import math
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from pkg.devcluster.cluster import CONTROLLERS, ControlPlane, ControlPlaneConfig, default_bin_dir
from pkg.devcluster.processes import free_port
from pkg.framework.client import KubeClient
from pkg.framework.client.config import new_api_client

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BenchPlane:
    plane: ControlPlane
    kube: KubeClient
    scheduler_metrics: str  # URL of the scheduler's /metrics


@contextlib.contextmanager
def bench_plane(
    *, controllers: tuple[str, ...] = CONTROLLERS, apiserver_args: tuple[str, ...] = ()
) -> Iterator[BenchPlane]:
    """etcd, kube-apiserver (with our CRDs), kube-scheduler (metrics on a port) and
    kube-controller-manager."""
    port = free_port()
    scheduler_args = (f"--secure-port={port}", "--authorization-always-allow-paths=/healthz,/readyz,/metrics")
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as work:
        plane = ControlPlane(
            ControlPlaneConfig(
                bin_dir=default_bin_dir(),
                work_dir=Path(work),
                controllers=controllers,
                extra_args={"kube-scheduler": scheduler_args, "kube-apiserver": apiserver_args},
            )
        )
        plane.start()
        try:
            # Our components watch our kinds (gpu-dra-controller's accountant reads PhysicalGPUs):
            # without the CRDs they cannot start, as in test/integration's control plane.
            plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
            plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
            kube = KubeClient(new_api_client(str(plane.kubeconfig)), field_manager="bench")
            yield BenchPlane(plane, kube, f"https://127.0.0.1:{port}/metrics")
        finally:
            plane.stop()


@dataclass(frozen=True)
class Interpreter:
    """How to start Python on the code of one checkout: ``argv`` then ``-c CODE``, under ``env``.

    A before/after benchmark runs the controllers of another tree (``--tree``). That tree goes on
    ``PYTHONPATH``, which precedes this checkout's editable install; ``-P`` keeps the working
    folder (this checkout, when run from its root) off ``sys.path`` ahead of it.
    """

    argv: list[str]
    env: dict[str, str]


def interpreter(tree: Path | None) -> Interpreter:
    """Python on ``tree``'s code (None: this checkout's)."""
    return Interpreter(argv=[sys.executable, "-P"], env={"PYTHONPATH": str(tree)} if tree else {})


def fetch(url: str, timeout: float = 10.0) -> str:
    """A metrics page; TLS unverified (the scheduler's serving certificate is self-signed)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(
        url, timeout=timeout, context=context if url.startswith("https") else None
    ) as r:
        return str(r.read().decode())


Labels = dict[str, str]


def samples(text: str, name: str, match: Labels | None = None) -> list[tuple[Labels, float]]:
    """Samples named ``name`` (the full sample name, e.g. ``..._bucket``) whose labels include ``match``."""
    found = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (match or {}).items()):
                found.append((dict(s.labels), float(s.value)))
    return found


def total(text: str, name: str, match: Labels | None = None) -> float:
    return sum(v for _, v in samples(text, name, match))


def histogram_quantile(text: str, name: str, q: float, match: Labels | None = None) -> float:
    """``histogram_quantile`` as Prometheus computes it: linear within the bucket, summed over
    every series that matches (so across profiles or label values); ``inf`` when the quantile lies
    beyond the largest finite bucket (Prometheus answers that bucket's bound instead)."""
    buckets: dict[float, float] = {}
    for labels, value in samples(text, f"{name}_bucket", match):
        le = float(labels["le"])
        buckets[le] = buckets.get(le, 0.0) + value
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] == 0:
        return math.nan
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        if buckets[le] >= rank:
            if math.isinf(le):
                return math.inf
            return lower + (le - lower) * (rank - below) / max(buckets[le] - below, 1e-12)
        lower, below = le, buckets[le]
    return lower


def parallel(items: Iterable[T], work: Callable[[T], Any], threads: int = 8) -> None:
    """Runs ``work`` over ``items`` on a few threads (API writes are I/O-bound), raising the first error."""
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(work, items):
            pass


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float, every: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan
