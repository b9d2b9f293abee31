"""Command-line options every control-plane binary shares, with environment fallbacks.

Flags win over the environment so that a one-off ``--leader-elect=false`` while debugging does not
need an edited Deployment; the environment carries what the Helm chart sets (``POD_NAMESPACE``).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ManagerOptions:
    kubeconfig: str | None
    metrics_bind_address: str
    leader_elect: bool
    leader_election_namespace: str
    leader_election_id: str
    workers: int


def parse_bool(value: str) -> bool:
    """``true|false`` (also ``1|0``, ``yes|no``) for flags that an environment variable may set."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def parse_duration(value: str) -> float:
    """Seconds from ``300``, ``30s``, ``5m``, ``1h`` or ``500ms``; must be positive."""
    text = value.strip().lower()
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    unit = next((u for u in ("ms", "s", "m", "h") if text.endswith(u)), "")
    try:
        seconds = float(text[: len(text) - len(unit)] if unit else text) * scale.get(unit, 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 300, 30s or 5m, got {value!r}"
        ) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"the duration must be positive, got {value!r}")
    return seconds


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--metrics-bind-address``: every binary talks to the API and serves
    ``/metrics``, ``/healthz`` and ``/readyz``."""
    parser.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file; in-cluster service account when unset",
    )
    parser.add_argument(
        "--metrics-bind-address",
        default=os.environ.get("METRICS_BIND_ADDRESS", ":8080"),
        help="address of /metrics, /healthz and /readyz (host:port; port 0 picks one)",
    )


def add_node_flags(parser: argparse.ArgumentParser) -> None:
    """``--node-name`` and ``--sysfs-root`` of the node components (DaemonSets)."""
    parser.add_argument(
        "--node-name", default=os.environ.get("NODE_NAME"), help="this node's name (default $NODE_NAME)"
    )
    parser.add_argument(
        "--sysfs-root",
        type=Path,
        default=Path(os.environ.get("SYSFS_ROOT", "/sys")),
        help="host sysfs mount",
    )


def add_manager_flags(
    parser: argparse.ArgumentParser, *, default_lease: str, default_workers: int = 2
) -> None:
    add_client_flags(parser)
    parser.add_argument(
        "--leader-elect",
        type=parse_bool,
        default=parse_bool(os.environ.get("LEADER_ELECT", "true")),
        help="compete for a Lease so only one replica acts (true|false)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the Lease (defaults to $POD_NAMESPACE)",
    )
    parser.add_argument("--leader-election-id", default=default_lease, help="name of the Lease")
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("WORKERS", str(default_workers))),
        help="concurrent reconciles per controller",
    )


def manager_options(args: argparse.Namespace) -> ManagerOptions:
    if args.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {args.workers}")
    return ManagerOptions(
        kubeconfig=args.kubeconfig,
        metrics_bind_address=args.metrics_bind_address,
        leader_elect=args.leader_elect,
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id,
        workers=args.workers,
    )
