"""Runs every benchmark and prints its figures: ``make bench`` or ``.venv/bin/python test/bench/run.py``.

A script rather than ``python -m test.bench``: the standard library has a regular package named
``test``, which wins over this repository's ``test`` folder (a namespace package, no
``__init__.py``) whatever the order of ``sys.path``, so ``-m test.bench`` never finds this folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import allocator_bench
import cel_engines
import prepare_bench


def main() -> None:
    started = time.perf_counter()
    allocator_bench.main()
    print()
    cel_engines.main()
    print()
    prepare_bench.main()
    print(f"\nbenchmarks took {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
