"""``gpu-handler``: this node's GPUs read through a vendor backend (spec §2.1 C, §2.2.1).

For now it runs the PhysicalGPU enrichment; the ResourceSlice publisher and the DRA kubelet plugin
join it in :func:`pkg.gpuhandler.setup.setup_handler`. Flags win over the environment; the
DaemonSet sets ``NODE_NAME`` from the downward API. ``--backend`` picks a plugin by entry point
name: ``nvidia`` on real nodes, ``simulated-nvidia`` in tests and the demo, where
``--sysfs-root`` is a fixture host tree and ``--sim-state-dir`` holds health overrides
(``<pci-address>.health``). There is no leader election: each handler owns only its node's cards.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from pkg.app.options import ManagerOptions
from pkg.app.runtime import RuntimeContainer
from pkg.controller.manager import install_signal_handlers
from pkg.gpuhandler.setup import GpuHandlerContainer, HandlerSettings, setup_handler
from pkg.logger import setup_logging
from pkg.vendor import default_registry

COMPONENT = "gpu-handler"
DEFAULT_ENRICH_SECONDS = 60.0
log = logging.getLogger(COMPONENT)


def _seconds(value: str) -> float:
    text = value.strip().lower()
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    unit = next((u for u in ("ms", "s", "m", "h") if text.endswith(u)), "")
    try:
        seconds = float(text[: len(text) - len(unit)] if unit else text) * scale.get(unit, 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 60, 30s or 5m, got {value!r}"
        ) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"the duration must be positive, got {value!r}")
    return seconds


def parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog=COMPONENT, description=__doc__)
    p.add_argument("--node-name", default=env("NODE_NAME"), help="this node's name (default $NODE_NAME)")
    p.add_argument(
        "--backend",
        default=env("GPU_BACKEND", "nvidia"),
        help="vendor backend: an entry point name of group gpu_control_plane.vendors (default nvidia)",
    )
    p.add_argument(
        "--sysfs-root", type=Path, default=Path(env("SYSFS_ROOT", "/sys")), help="host sysfs mount"
    )
    p.add_argument(
        "--sim-state-dir",
        type=Path,
        default=env("SIM_STATE_DIR") or None,
        help="state folder of the simulated backend (health overrides <pci-address>.health)",
    )
    p.add_argument(
        "--enrich-period",
        type=_seconds,
        default=_seconds(env("ENRICH_PERIOD", str(DEFAULT_ENRICH_SECONDS))),
        help="re-read every ready card this often, jittered by ±10%% (e.g. 60, 30s, 5m)",
    )
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig; in-cluster when unset")
    p.add_argument(
        "--metrics-bind-address",
        default=env("METRICS_BIND_ADDRESS", ":8080"),
        help="address of /metrics, /healthz and /readyz (host:port; port 0 picks one)",
    )
    return p


def settings_from(args: argparse.Namespace) -> HandlerSettings:
    if not args.node_name:
        raise SystemExit(f"{COMPONENT}: --node-name (or $NODE_NAME) is required")
    return HandlerSettings(
        node_name=args.node_name,
        backend=args.backend,
        sysfs_root=args.sysfs_root,
        state_dir=args.sim_state_dir,
        enrich_period=args.enrich_period,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = settings_from(args)
    try:  # fail before anything connects: a typo in --backend is the likeliest start-up error
        default_registry().plugin(settings.backend)
    except KeyError as exc:
        raise SystemExit(f"{COMPONENT}: {exc.args[0]}") from None
    setup_logging()
    options = ManagerOptions(
        kubeconfig=args.kubeconfig,
        metrics_bind_address=args.metrics_bind_address,
        leader_elect=False,
        leader_election_namespace="",
        leader_election_id="",
        workers=settings.workers,
    )
    runtime = RuntimeContainer(options=options, component=COMPONENT)
    handler = GpuHandlerContainer(settings=settings, client=runtime.client(), informers=runtime.informers())
    backend = handler.backend()
    manager = runtime.manager()
    setup_handler(manager, handler)
    stop = threading.Event()
    install_signal_handlers(stop)
    log.info(
        "starting",
        extra={
            "node": settings.node_name,
            "backend": settings.backend,
            "sysfs_root": str(settings.sysfs_root),
        },
    )
    try:
        manager.run(stop)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
