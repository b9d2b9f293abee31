"""``gpu-handler``: this node's GPUs read through a vendor backend.

Without a subcommand it runs on its node: the PhysicalGPU enrichment and the ResourceSlice
publisher (``--publish``), wired in :func:`pkg.gpuhandler.setup.setup_handler`; the DRA kubelet
plugin joins them there. Flags win over the environment; the DaemonSet sets ``NODE_NAME`` from the
downward API. ``--backend`` picks a plugin by entry point name: ``nvidia`` on real nodes,
``simulated-nvidia`` in tests and the demo, where ``--sysfs-root`` is a fixture host tree and
``--sim-state-dir`` holds health overrides (``<pci-address>.health``). There is no leader
election: each handler owns only its node's cards and slices.

``gpu-handler offers`` prints, as YAML, the PhysicalGPUs and ResourceSlices the handler would
publish for a sysfs tree, without a cluster (:mod:`pkg.gpuhandler.offline`); exit code 2 means
bad input (no sysfs devices folder, or one that cannot be listed), 1 that something could not be
read — a PCI function or a host file, each named in the output's header with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from api.gpu.v1alpha1 import IMEX_MAX_CHANNEL
from pkg.app.options import ManagerOptions, add_client_flags, add_node_flags, parse_bool, parse_duration
from pkg.app.runtime import RuntimeContainer, run_controllers
from pkg.backends import default_registry
from pkg.backends.driver_files import CAPABILITIES, DriverRootOptions
from pkg.dra.model.slices import ServerVersion
from pkg.framework.logging import setup_logging
from pkg.framework.manager.manager import Manager
from pkg.gpuhandler.attribution.setup import AttributionSettings
from pkg.gpuhandler.offline import (
    NEWEST_SERVER_VERSION,
    OfflineInputError,
    OfflineRequest,
    compute_offers,
    render_yaml,
)
from pkg.gpuhandler.preparation.setup import PluginSettings
from pkg.gpuhandler.setup import GpuHandlerContainer, HandlerSettings, setup_handler

COMPONENT = "gpu-handler"
DEFAULT_ENRICH_SECONDS = 60.0
DEFAULT_PUBLISH_RESYNC_SECONDS = 300.0
EXIT_BAD_INPUT = 2
EXIT_READ_FAILED = 1


def _server_version(value: str) -> ServerVersion:
    major, dot, minor = value.strip().partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise argparse.ArgumentTypeError(f"expected MAJOR.MINOR such as 1.34 or 1.37, got {value!r}")
    return ServerVersion(int(major), int(minor))


def _optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _capabilities(value: str) -> frozenset[str]:
    """``all`` (every capability the driver root has) or a comma-separated list of names."""
    if value.strip() == "all":
        return frozenset(CAPABILITIES)
    names = frozenset(part.strip() for part in value.split(",") if part.strip())
    unknown = sorted(names - set(CAPABILITIES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected all or a comma-separated list of {', '.join(CAPABILITIES)}, got {value!r}"
        )
    return names


def parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog=COMPONENT, description=__doc__)
    add_node_flags(p)
    p.add_argument(
        "--backend",
        default=env("GPU_BACKEND", "nvidia"),
        help="vendor backend: an entry point name of group gpu_control_plane.vendors (default nvidia)",
    )
    p.add_argument(
        "--sim-state-dir",
        type=Path,
        default=env("SIM_STATE_DIR") or None,
        help="state folder of the simulated backend (health overrides <pci-address>.health)",
    )
    p.add_argument(
        "--dev-root",
        type=Path,
        default=Path(env("DEV_ROOT", "/dev")),
        help="the host's /dev as this process sees it and as CDI specs name it (default /dev)",
    )
    p.add_argument(
        "--proc-root",
        type=Path,
        default=Path(env("PROC_ROOT", "/proc")),
        help="the host's /proc, for the GPU driver's files and this boot's ID (default /proc)",
    )
    p.add_argument(
        "--kubelet-plugin",
        type=parse_bool,
        default=parse_bool(env("KUBELET_PLUGIN", "true")),
        help="serve the kubelet as the DRA plugin of gpu.deckhouse.io: prepare and unprepare devices",
    )
    p.add_argument(
        "--kubelet-root",
        type=Path,
        default=Path(env("KUBELET_ROOT", "/var/lib/kubelet")),
        help="the kubelet's root folder (its plugins/ and plugins_registry/ hold the plugin's sockets)",
    )
    p.add_argument(
        "--plugin-instance",
        default=env("POD_UID") or "default",
        help="names this copy's sockets, so two copies overlap during a rolling update "
        "(default $POD_UID, from the downward API)",
    )
    p.add_argument(
        "--cdi-dir",
        type=Path,
        default=Path(env("CDI_DIR", "/var/run/cdi")),
        help="where the container runtime reads CDI specs (default /var/run/cdi)",
    )
    p.add_argument(
        "--driver-root",
        type=Path,
        default=Path(env("DRIVER_ROOT", "/")),
        help="where this process reads the NVIDIA driver's installation: the host root, a containerised "
        "driver's root or a driver folder such as /usr/local/nvidia (default /)",
    )
    p.add_argument(
        "--driver-root-on-host",
        type=Path,
        default=_optional_path(env("DRIVER_ROOT_ON_HOST")),
        help="the same folder's path on the host, which CDI specs name (default: --driver-root)",
    )
    p.add_argument(
        "--host-run",
        type=Path,
        default=Path(env("HOST_RUN", "/run")),
        help="the host's /run as this process sees it: the driver daemons' sockets (default /run)",
    )
    p.add_argument(
        "--driver-capabilities",
        type=_capabilities,
        default=_capabilities(env("DRIVER_CAPABILITIES", "all")),
        help="the driver capabilities a container gets when its device's config names none: all "
        f"(every one the driver root has; the default) or comma-separated of {','.join(CAPABILITIES)}",
    )
    p.add_argument(
        "--cdi-hook-source",
        type=Path,
        default=_optional_path(env("CDI_HOOK_SOURCE")),
        help="the nvidia-cdi-hook program to put on the host for the base CDI spec (the image's copy)",
    )
    p.add_argument(
        "--mps-root",
        type=Path,
        default=Path(env("MPS_ROOT", "/run/gpu.deckhouse.io/mps")),
        help="the MPS control daemons' folders, one per shared card, on a host tmpfs: clients mount "
        "its shm folder as /dev/shm (default /run/gpu.deckhouse.io/mps)",
    )
    p.add_argument(
        "--daemons-on-host",
        type=parse_bool,
        default=parse_bool(env("DAEMONS_ON_HOST", "false")),
        help="start the daemons of shares (MPS control daemons) on the host, outside this container's "
        "cgroups, so they outlive it; needs the host's PID namespace (hostPID) and root (default false)",
    )
    p.add_argument(
        "--prepare-lock-timeout",
        type=parse_duration,
        default=parse_duration(env("PREPARE_LOCK_TIMEOUT", "30s")),
        help="how long a prepare waits for the node lock before it fails (default 30s)",
    )
    p.add_argument(
        "--enrich-period",
        type=parse_duration,
        default=parse_duration(env("ENRICH_PERIOD", str(DEFAULT_ENRICH_SECONDS))),
        help="re-read every ready card this often, jittered by ±10%% (e.g. 60, 30s, 5m)",
    )
    p.add_argument(
        "--health-quiet-period",
        type=parse_duration,
        default=parse_duration(env("HEALTH_QUIET_PERIOD", "60s")),
        help="an unhealthy card recovers (its device taints go) once no health event came for this "
        "long and its health probe passes (default 60s)",
    )
    p.add_argument(
        "--attribution-interval",
        type=parse_duration,
        default=parse_duration(env("ATTRIBUTION_INTERVAL", "10s")),
        help="read the processes on every card this often and attribute them to Pods (metrics "
        "gpu_process_*); 0 turns attribution off; needs the kubelet plugin and hostPID (default 10s)",
    )
    p.add_argument(
        "--attribution-max-series",
        type=int,
        default=int(env("ATTRIBUTION_MAX_SERIES", "1000")),
        help="at most this many process rows on the node; the smallest beyond it are summed per device "
        'into attribution="capped" rows (default 1000)',
    )
    p.add_argument(
        "--usage-status-interval",
        type=parse_duration,
        default=parse_duration(env("USAGE_STATUS_INTERVAL", "30s")),
        help="write a claim's usage into its status.devices at most this often, and only when it changed "
        "materially (kubectl gpu top reads it); 0 never writes (default 30s)",
    )
    p.add_argument(
        "--processes-proc",
        type=Path,
        default=Path(env("PROCESSES_PROC", "/proc")),
        help="the /proc of the PID namespace the driver's process IDs belong to: the host's, which a "
        "Pod with hostPID sees at /proc (default /proc)",
    )
    p.add_argument(
        "--publish",
        type=parse_bool,
        default=parse_bool(env("PUBLISH", "true")),
        help="publish this node's offers as ResourceSlices (true|false)",
    )
    p.add_argument(
        "--publish-resync-period",
        type=parse_duration,
        default=parse_duration(env("PUBLISH_RESYNC_PERIOD", str(DEFAULT_PUBLISH_RESYNC_SECONDS))),
        help="republish (a no-op when nothing changed) this often, jittered by ±20%% (e.g. 5m)",
    )
    p.add_argument(
        "--imex-channels",
        type=int,
        default=int(env("IMEX_CHANNELS", "128")),
        help="offer IMEX channels 1..N to compute domains when the node's cards are in a multi-node "
        "NVLink fabric; 0 offers none (default 128, at most 2047)",
    )
    add_client_flags(p)
    commands = p.add_subparsers(dest="command", title="subcommands", metavar="{offers}")
    _offers_parser(commands)
    return p


def _offers_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    o = commands.add_parser(
        "offers",
        help="print the PhysicalGPUs and ResourceSlices this node would get, without a cluster",
        description="Prints, as multi-document YAML, the PhysicalGPU statuses (as gpu-node-agent and "
        "gpu-handler write them, assuming DriverReady=True) and the ResourceSlices gpu-handler would "
        "publish for a host's sysfs. Talks to no API server.",
    )
    o.add_argument("--node-name", default=env("NODE_NAME"), help="the node's name (default $NODE_NAME)")
    o.add_argument("--sysfs-root", type=Path, required=True, help="the host's sysfs (e.g. /sys)")
    o.add_argument(
        "--backend",
        default="nvidia",
        help="vendor backend: an entry point name of group gpu_control_plane.vendors (default nvidia)",
    )
    o.add_argument("--pci-ids", type=Path, default=None, help="pci.ids (default: the system's)")
    o.add_argument(
        "--host-root",
        type=Path,
        default=Path("/"),
        help="host root: <host-root>/etc/os-release and <host-root>/proc/sys/kernel/osrelease",
    )
    o.add_argument(
        "--sim-state-dir", type=Path, default=None, help="health overrides of the simulated backend"
    )
    version = NEWEST_SERVER_VERSION
    o.add_argument(
        "--server-version",
        type=_server_version,
        default=version,
        help=f"the API server's MAJOR.MINOR, which sets the slice layout (default {version.major}."
        f"{version.minor}; 1.34 keeps counters beside the devices)",
    )
    o.add_argument(
        "--allow-mig",
        type=parse_bool,
        default=True,
        help="the Node's gpu.deckhouse.io/allow-mig label: false publishes no MIG offers (default true)",
    )


def settings_from(args: argparse.Namespace) -> HandlerSettings:
    if not args.node_name:
        raise SystemExit(f"{COMPONENT}: --node-name (or $NODE_NAME) is required")
    if not 0 <= args.imex_channels <= IMEX_MAX_CHANNEL:
        raise SystemExit(
            f"{COMPONENT}: --imex-channels {args.imex_channels} is not between 0 and {IMEX_MAX_CHANNEL}"
        )
    plugin = None
    if args.kubelet_plugin:
        plugin = PluginSettings(
            node_name=args.node_name,
            kubelet_root=args.kubelet_root,
            instance=args.plugin_instance,
            cdi_dir=args.cdi_dir,
            mps_root=args.mps_root,
            lock_timeout=args.prepare_lock_timeout,
            sysfs_root=args.sysfs_root,
            dev_root=args.dev_root,
            proc_root=args.proc_root,
        )
    return HandlerSettings(
        node_name=args.node_name,
        backend=args.backend,
        sysfs_root=args.sysfs_root,
        dev_root=args.dev_root,
        proc_root=args.proc_root,
        state_dir=args.sim_state_dir,
        daemons_on_host=args.daemons_on_host,
        enrich_period=args.enrich_period,
        health_quiet_period=args.health_quiet_period,
        publish=args.publish,
        publish_resync_period=args.publish_resync_period,
        plugin=plugin,
        driver_root=DriverRootOptions(
            root=args.driver_root,
            root_on_host=args.driver_root_on_host,
            host_run=args.host_run,
            capabilities=args.driver_capabilities,
        ),
        cdi_hook_source=args.cdi_hook_source,
        imex_channels=args.imex_channels,
        attribution=AttributionSettings(
            interval=args.attribution_interval,
            max_series=args.attribution_max_series,
            status_interval=args.usage_status_interval,
            processes_proc=args.processes_proc,
        ),
    )


def offers(args: argparse.Namespace) -> int:
    """``gpu-handler offers``: the YAML on stdout; problems on stderr, logs as JSON on stderr."""
    setup_logging({**os.environ, "LOG_LEVEL": os.environ.get("LOG_LEVEL", "Warn")}, stream=sys.stderr)
    if not args.node_name:
        print(f"{COMPONENT} offers: --node-name (or $NODE_NAME) is required", file=sys.stderr)
        return EXIT_BAD_INPUT
    request = OfflineRequest(
        node_name=args.node_name,
        sysfs_root=args.sysfs_root,
        backend=args.backend,
        host_root=args.host_root,
        pci_ids=args.pci_ids,
        state_dir=args.sim_state_dir,
        server_version=args.server_version,
        allow_mig=args.allow_mig,
    )
    try:
        result = compute_offers(request)
    except OfflineInputError as exc:
        print(f"{COMPONENT} offers: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(render_yaml(request, result))
    if result.failures:
        print(f"{COMPONENT} offers: {len(result.failures)} problem(s), listed in the header", file=sys.stderr)
        return EXIT_READ_FAILED
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "offers":
        return offers(args)
    settings = settings_from(args)
    try:  # fail before anything connects: a typo in --backend is the likeliest start-up error
        default_registry().plugin(settings.backend)
    except KeyError as exc:
        raise SystemExit(f"{COMPONENT}: {exc.args[0]}") from None
    options = ManagerOptions(
        kubeconfig=args.kubeconfig,
        metrics_bind_address=args.metrics_bind_address,
        leader_elect=False,
        leader_election_namespace="",
        leader_election_id="",
        workers=settings.workers,
    )

    def setup(runtime: RuntimeContainer, manager: Manager) -> Callable[[], None]:
        handler = GpuHandlerContainer(
            settings=settings,
            client=runtime.client(),
            informers=runtime.informers(),
            recorder=runtime.recorder(),
        )
        setup_handler(manager, handler)
        return handler.backend().close

    log_extra = {
        "node": settings.node_name,
        "backend": settings.backend,
        "sysfs_root": str(settings.sysfs_root),
    }
    return run_controllers(component=COMPONENT, options=options, setup=setup, log_extra=log_extra)


if __name__ == "__main__":
    sys.exit(main())
