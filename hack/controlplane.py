#!/usr/bin/env python3
"""Runs a local control plane in the foreground until Ctrl-C (or SIGTERM).

    .venv/bin/python hack/controlplane.py [--work-dir DIR] [--no-crds]

Prints the kubeconfig path; ``KUBECONFIG=<path> kubectl get nodes`` then talks to it. Everything it
started is stopped, and its work folder removed unless ``--keep``, when it exits.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from pkg.devcluster.cluster import ControlPlane, ControlPlaneConfig, default_bin_dir

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work-dir", type=Path, help="folder for certificates, etcd data, logs")
    parser.add_argument("--no-crds", action="store_true", help="do not apply config/crd")
    parser.add_argument("--keep", action="store_true", help="keep the work folder on exit")
    args = parser.parse_args()
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="gpu-cp-"))
    plane = ControlPlane(ControlPlaneConfig(bin_dir=default_bin_dir(), work_dir=work_dir))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    plane.start()
    try:
        if not args.no_crds:
            plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
        print(f"control plane ready at {plane.server_url}")
        print(f"export KUBECONFIG={plane.kubeconfig}")
        print(f"logs: {plane.logs_dir}", flush=True)
        stop.wait()
    finally:
        plane.stop()
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
