"""Runs the benchmarks and prints their figures: ``make bench`` (``BENCH_ARGS=--quick`` for a small
size) or ``PYTHONPATH=test .venv/bin/python -m bench [--quick] [--only allocation,packing,...]``.

``--quick`` runs every benchmark at a small size; ``make test`` runs it (``make bench-smoke``) so a
change that breaks one fails CI: nothing else runs them, and table 1 once rotted unseen.

The four comparison tables of docs/performance.md come first — 1. allocation (the real
kube-scheduler beside gpu-dra-controller), 2. packing (fractions of the exact optimum), 3. the
framework beside kopf, 4. the node components' footprint (real nodes: root, and the machine's
real-node lock) — then, in the full run, the allocator's own benchmarks (decisions against the
figures before the restart/decision work, fragmentation, CEL engines, NodePrepare latency, the
allocation ledger at 100,000 open allocations, the controllers' memory at 1,000 and 5,000 nodes
and explain at 1,000, and per-Pod attribution on a full node).

``-m bench`` with ``test/`` on the path, not ``-m test.bench``: the standard library has a regular
package named ``test``, which wins over this repository's ``test`` folder whatever the order of
``sys.path``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

from bench import (
    allocator_bench,
    attribution_bench,
    cel_engines,
    framework_bench,
    ledger_bench,
    node_bench,
    packing_bench,
    prepare_bench,
    scale_bench,
    scheduler_bench,
    who_bench,
)

COMPARISONS: dict[str, Callable[..., None]] = {
    "allocation": scheduler_bench.main,
    "packing": packing_bench.main,
    "framework": framework_bench.main,
    "node": node_bench.main,
}
OWN: dict[str, Callable[..., None]] = {
    "allocator": allocator_bench.main,
    "cel": cel_engines.main,
    "prepare": prepare_bench.main,
    "ledger": ledger_bench.main,
    "scale": scale_bench.main,
    "attribution": attribution_bench.main,
    "who": who_bench.main,
}


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem / 1024 / 1024:.0f} GiB, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (a few minutes): every benchmark, as make test's smoke runs them",
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of {', '.join([*COMPARISONS, *OWN])}"
    )
    args = parser.parse_args()
    chosen = set(filter(None, args.only.split(","))) or set(COMPARISONS) | set(OWN)
    unknown = chosen - set(COMPARISONS) - set(OWN)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    print(
        f"machine: {machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        f"{'; --quick' if args.quick else ''}\n",
        flush=True,
    )
    started = time.perf_counter()
    for name, run in COMPARISONS.items():
        if name in chosen:
            began = time.perf_counter()
            run(quick=args.quick)
            print(f"  ({name}: {time.perf_counter() - began:.0f}s)\n", flush=True)
    for name, run in OWN.items():
        if name in chosen:
            began = time.perf_counter()
            run(quick=args.quick)
            print(f"  ({name}: {time.perf_counter() - began:.0f}s)\n", flush=True)
    print(f"benchmarks took {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
