"""The allocation bench's own harness still runs: a bench control plane starts gpu-dra-controller
and it allocates (table 1 of ``make bench`` once rotted unnoticed, because the bench's
control plane lacked our CRDs and the controller never synced its caches).

Small on purpose (5 nodes, 10 claims, about a minute on 2 CPUs); the figures are not asserted, only
that the controller allocated every claim through the bench's code path.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.bench_cluster import bench_plane
from bench.scheduler_bench import load_cluster, run_controller


def test_bench_controller_row_runs() -> None:
    with bench_plane() as bp, tempfile.TemporaryDirectory(prefix="gpu-bench-smoke-") as work:
        load_cluster(bp, 5)
        row = run_controller(bp, 10, Path(work))
    assert row.per_second > 0
