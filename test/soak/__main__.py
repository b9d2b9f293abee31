"""The soak: GPU Pods of every kind on real local nodes while faults strike around them
(docs/reliability.md). As root, from the repository's root:

    PYTHONPATH=test .venv/bin/python -m soak --minutes 30 --rate 60   # make soak
    PYTHONPATH=test .venv/bin/python -m soak --smoke                  # make soak-smoke: each fault once

``-m soak`` with ``test/`` on the path, not ``-m test.soak``: the standard library has a regular
package named ``test`` (test/bench/run.py says more). Exit code 0 only when no invariant was
broken, every strike worked and the nodes left nothing behind; the report is printed and written
as JSON (``--report``), every log copied to ``--logs``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from pathlib import Path

from pkg.devcluster.parentstop import STOP_SIGNALS, watch_parent
from soak.run import Settings, soak

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def settings(args: argparse.Namespace) -> Settings:
    if args.smoke:
        return Settings(
            seconds=0, rate=args.rate or 30, smoke=True, warmup=60, seed=args.seed, bound=args.bound
        )
    if args.minutes <= 0:
        raise SystemExit(f"--minutes must be positive, got {args.minutes}")
    warmup = 120.0
    return Settings(
        seconds=args.minutes * 60 - warmup,
        rate=args.rate or 60,
        rounds=args.rounds,
        warmup=warmup,
        seed=args.seed,
        bound=args.bound,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run, warm-up included")
    parser.add_argument("--rate", type=float, default=0.0, help="GPU Pods per minute (default 60; smoke 30)")
    parser.add_argument(
        "--smoke", action="store_true", help="every fault kind once, back to back (a few minutes)"
    )
    parser.add_argument(
        "--rounds", type=int, help="strikes of each fault kind (default: as many as fit, at least 2)"
    )
    parser.add_argument("--bound", type=float, default=120.0, help="recovery bound after each fault, seconds")
    parser.add_argument("--seed", type=int, default=0, help="the schedule's and the workload's random seed")
    parser.add_argument("--report", type=Path, default=ARTIFACTS / "soak-report.json")
    parser.add_argument("--logs", type=Path, default=ARTIFACTS / "soak-logs")
    args = parser.parse_args()
    chosen = settings(args)
    if os.geteuid() != 0:
        parser.error("real nodes need root (mounts, network namespaces, cgroups): run it as root")
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.default_int_handler)  # KeyboardInterrupt: the cluster's clean-up runs
    watch_parent(lambda: os.kill(os.getpid(), signal.SIGINT))  # a signal to `make soak`'s make
    work = Path(tempfile.mkdtemp(prefix="gpu-soak-"))
    try:
        sys.exit(soak(chosen, work=work, report_path=args.report, logs=args.logs))
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr, flush=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
