"""``gpu-node-agent``: this node's PCI GPUs as PhysicalGPUs, its host facts as Node labels.

Flags win over the environment; the DaemonSet sets ``NODE_NAME`` from the downward API and mounts
the host's sysfs and root somewhere other than ``/sys`` and ``/`` (``--sysfs-root``,
``--host-root``). There is no leader election: each agent owns only its own node's objects.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from pkg.app.options import ManagerOptions, add_client_flags, add_node_flags, parse_bool, parse_duration
from pkg.app.runtime import RuntimeContainer, run_controllers
from pkg.framework.controller.source import SignalSource
from pkg.framework.manager.manager import Manager
from pkg.nodeagent.setup import AgentSettings, NodeAgentContainer, setup_agent

COMPONENT = "gpu-node-agent"
DEFAULT_RESYNC_SECONDS = 300.0


def parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog=COMPONENT, description=__doc__)
    add_node_flags(p)
    p.add_argument(
        "--host-root",
        type=Path,
        default=Path(env("HOST_ROOT", "/")),
        help="host root mount: <host-root>/etc/os-release and <host-root>/proc/sys/kernel/osrelease",
    )
    p.add_argument(
        "--pci-ids", type=Path, default=env("PCI_IDS") or None, help="pci.ids (default: the system's)"
    )
    p.add_argument(
        "--resync-period",
        type=parse_duration,
        default=parse_duration(env("RESYNC_PERIOD", str(DEFAULT_RESYNC_SECONDS))),
        help="safety resync period, jittered by ±20%% (e.g. 300, 30s, 5m)",
    )
    add_client_flags(p)
    p.add_argument(
        "--udev", type=parse_bool, default=parse_bool(env("UDEV", "true")), help="listen to PCI uevents"
    )
    return p


def settings_from(args: argparse.Namespace) -> AgentSettings:
    if not args.node_name:
        raise SystemExit(f"{COMPONENT}: --node-name (or $NODE_NAME) is required")
    return AgentSettings(
        node_name=args.node_name,
        sysfs_root=args.sysfs_root,
        host_root=args.host_root,
        pci_ids=args.pci_ids,
        resync_period=args.resync_period,
        udev=args.udev,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = settings_from(args)
    options = ManagerOptions(
        kubeconfig=args.kubeconfig,
        metrics_bind_address=args.metrics_bind_address,
        leader_elect=False,
        leader_election_namespace="",
        leader_election_id="",
        workers=1,
    )

    def setup(runtime: RuntimeContainer, manager: Manager) -> None:
        agent = NodeAgentContainer(settings=settings, client=runtime.client(), informers=runtime.informers())
        # SIGHUP: an immediate sync on an operator's request (kill -HUP <pid>); built here, on the
        # main thread, the only one that may install a signal handler.
        sighup = SignalSource(signal.SIGHUP, name="sighup", message="received SIGHUP: syncing now")
        setup_agent(manager, agent, extra_sources=[sighup])

    log_extra = {"node": settings.node_name, "sysfs_root": str(settings.sysfs_root), "udev": settings.udev}
    return run_controllers(component=COMPONENT, options=options, setup=setup, log_extra=log_extra)


if __name__ == "__main__":
    sys.exit(main())
