"""gpu-handler on the nodes whose cards are DriverReady (gate ``gpu.deckhouse.io/driver-ready``).

One DaemonSet per vendor backend: ``<config>-gpu-handler`` with ``gpuHandler.backend`` (NVIDIA), and,
with ``gpuHandler.amd`` on, ``<config>-gpu-handler-amd`` with the AMD backend on the nodes labelled
``gpu.deckhouse.io/amd.present``; the NVIDIA one then also needs ``gpu.deckhouse.io/nvidia.present``,
so neither runs on a node without its vendor's cards (a node with both would get both, which is not
supported: the two would publish the node's one pool, docs/backends/amd.md). What follows
about NVML, MPS, the driver root and the CDI hook is the NVIDIA DaemonSet's alone; the AMD one reads
and prepares its cards through sysfs and ``/dev`` (docs/backends/amd.md).

What the Pod needs from the host, and nothing more:

* the host's sysfs, read-only at ``/host/sys``: the backend finds its cards there;
* NVML, for the nvidia backend: the driver's library and ``/dev/nvidia*``, which the NVIDIA
  container runtime injects when ``runtimeClassName`` selects it (it reads ``NVIDIA_VISIBLE_DEVICES``
  and ``NVIDIA_DRIVER_CAPABILITIES``; other runtimes ignore them);
* with the kubelet plugin: the kubelet's ``plugins/`` and ``plugins_registry/`` folders, the CDI
  folder and the MPS folder at their host paths (the kubelet dials the socket path the plugin
  reports; CDI specs name host paths), the NVIDIA runtime's ``compute`` capability too (the MPS
  control daemon and server come with it), and the host's ``/dev`` (``--dev-root``), where MIG
  capability device nodes are made; root and privileged, as MIG changes through NVML and mknod
  need; ``POD_UID`` names this Pod's sockets, and the DaemonSet starts a node's new Pod before the
  old one stops, so the kubelet always has a plugin to call; the host's PID namespace, because the
  MPS control daemons are started on the host, outside the Pod's cgroups, and so keep serving
  their clients while the Pod is replaced (``--daemons-on-host``, :mod:`pkg.backends.host_daemons`);
  the driver root read-only at ``/host/driver-root`` and the host's ``/run`` read-only at
  ``/host/run`` (both with mount propagation from the host, so a containerised driver that starts
  later, and its daemons' sockets, become visible): the driver's user space the base CDI spec
  gives every GPU container; the image's ``nvidia-cdi-hook``, which the plugin copies to the host.

Without the plugin: no privileges, root or host namespaces. A node that loses the gate (its validator
fails or disappears) loses this Pod; its offers are withdrawn by gpu-handler as soon as DriverReady
leaves True, and the kubelet removes a driver's ResourceSlices of a node 30 s after its plugin went
away.

With ``simulatedHosts`` (tests and demos) every host path above is the node's folder of simulated
hosts instead, one mount for all of them (:mod:`.simulation`), and the simulated backend is given
its state folder (where the simulated host keeps its stand-in ``nvidia-cuda-mps-control``).
"""

from __future__ import annotations

from kubernetes.client import (
    V1DaemonSet,
    V1PodSecurityContext,
    V1PodSpec,
    V1RollingUpdateDaemonSet,
    V1SeccompProfile,
    V1SecurityContext,
    V1VolumeMount,
)

from api.gpu.v1alpha1 import SimulatedHostsSettings
from api.gpu.v1alpha1.operatorconfig import AttributionSettings, GpuHandlerSettings, KubeletPluginSettings
from pkg.gpucontroller.names import (
    GATE_VALUE,
    LABEL_AMD_PRESENT,
    LABEL_DRIVER_READY,
    LABEL_NVIDIA_PRESENT,
    Component,
)
from pkg.gpucontroller.orchestrator.render import metrics_proxy, simulation
from pkg.gpucontroller.orchestrator.render.common import (
    NVIDIA_RUNTIME_ENV,
    RenderContext,
    daemon_set,
    env_of,
    field_env,
    gate_selector,
    host_path,
    logging_env,
    our_binary,
    restricted_pod,
    tmp_volume,
)

# One new Pod per node before the old one stops: the plugin's sockets are named per Pod, and both
# Pods publish the node's pool under one node lock, one generation after the other.
SURGE = V1RollingUpdateDaemonSet(max_surge=1, max_unavailable=0)
# The plugin runs nvidia-cuda-mps-control for MPS shares: the runtime injects it with compute.
PLUGIN_RUNTIME_ENV = {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
DRIVER_ROOT_MOUNT = "/host/driver-root"
HOST_RUN_MOUNT = "/host/run"
CDI_HOOK_IN_IMAGE = "/opt/gpu-control-plane/bin/nvidia-cdi-hook"


def render(context: RenderContext) -> V1DaemonSet:
    """The NVIDIA gpu-handler (``gpuHandler.backend``): on every DriverReady node, or, while the AMD
    one runs beside it, on the DriverReady nodes with NVIDIA cards."""
    settings = context.spec.gpu_handler
    plugin = settings.kubelet_plugin
    gates = [LABEL_DRIVER_READY, *([LABEL_NVIDIA_PRESENT] if settings.amd.enabled else [])]
    pod = _pod(
        context,
        backend=settings.backend,
        plugin_args=_plugin_args(plugin, driver_root=context.spec.driver_root, nvidia=True),
        imex_channels=settings.imex_channels,
        runtime_env=NVIDIA_RUNTIME_ENV | (PLUGIN_RUNTIME_ENV if plugin.enabled else {}),
        node_selector=_gated(gates, settings),
    )
    pod.runtime_class_name = settings.runtime_class_name
    if plugin.enabled:
        _serve_the_kubelet(
            pod,
            plugin,
            driver_root=context.spec.driver_root,
            simulated=context.spec.simulated_hosts is not None,
            nvidia=True,
        )
    return _finish(context, Component.GPU_HANDLER, pod)


def render_amd(context: RenderContext) -> V1DaemonSet:
    """The AMD gpu-handler (``gpuHandler.amd``) on the DriverReady nodes with AMD cards: the same
    binary with the AMD backend, without what only NVIDIA's backend uses (no runtime class or its
    environment, no MPS folder, driver root, host ``/run`` or ``nvidia-cdi-hook``)."""
    settings = context.spec.gpu_handler
    plugin = settings.kubelet_plugin
    pod = _pod(
        context,
        backend=settings.amd.backend,
        plugin_args=_plugin_args(plugin, driver_root=context.spec.driver_root, nvidia=False),
        imex_channels=0,  # IMEX is NVIDIA's
        runtime_env={},
        node_selector=_gated([LABEL_DRIVER_READY, LABEL_AMD_PRESENT], settings),
    )
    if plugin.enabled:
        _serve_the_kubelet(
            pod,
            plugin,
            driver_root=context.spec.driver_root,
            simulated=context.spec.simulated_hosts is not None,
            nvidia=False,
        )
    return _finish(context, Component.GPU_HANDLER_AMD, pod)


def _gated(gates: list[str], settings: GpuHandlerSettings) -> dict[str, str] | None:
    """The settings' extra labels and every gate label (the gates win)."""
    selector = gate_selector(None, settings) or {}
    return selector | dict.fromkeys(gates, GATE_VALUE)


def _pod(
    context: RenderContext,
    *,
    backend: str,
    plugin_args: list[str],
    imex_channels: int,
    runtime_env: dict[str, str],
    node_selector: dict[str, str] | None,
) -> V1PodSpec:
    """The Pod both backends share: the handler reading the host's sysfs, and its simulated host;
    ``imex_channels`` is how many IMEX channels the node offers to compute domains (0: none)."""
    settings = context.spec.gpu_handler
    plugin = settings.kubelet_plugin
    handler = our_binary(
        settings,
        name=Component.GPU_HANDLER.value,
        args=[
            f"--backend={backend}",
            "--sysfs-root=/host/sys",
            f"--enrich-period={settings.enrich_period}",
            f"--publish={str(settings.publish).lower()}",
            f"--publish-resync-period={settings.publish_resync_period}",
            f"--imex-channels={imex_channels}",
            f"--kubelet-plugin={str(plugin.enabled).lower()}",
            *(plugin_args + _attribution_args(settings.attribution) if plugin.enabled else []),
            f"--metrics-bind-address=:{settings.metrics_port}",
        ],
        env=[
            *([field_env("POD_UID", "metadata.uid")] if plugin.enabled else []),
            *env_of(runtime_env),
            *logging_env(context.spec),
        ],
        metrics_port=settings.metrics_port,
        mounts=[V1VolumeMount(name="host-sys", mount_path="/host/sys", read_only=True)],
    )
    pod = V1PodSpec(
        containers=[handler],
        security_context=restricted_pod(),
        node_selector=node_selector,
        volumes=[host_path("host-sys", "/sys", "Directory"), tmp_volume()],
    )
    hosts = context.spec.simulated_hosts
    if hosts is not None:
        _simulate(pod, hosts, plugin)
    return pod


def _finish(context: RenderContext, component: Component, pod: V1PodSpec) -> V1DaemonSet:
    """The metrics proxy goes in last: it moves the handler's endpoint the plugin's setup left alone."""
    settings = context.spec.gpu_handler
    if context.spec.metrics_proxy is not None:
        metrics_proxy.put_in_front(pod, context.spec.metrics_proxy)
    return daemon_set(context, component, settings, pod=pod, rolling_update=SURGE)


def _plugin_args(plugin: KubeletPluginSettings, *, driver_root: str, nvidia: bool) -> list[str]:
    """The kubelet plugin's flags: the kubelet's and CDI's folders, /dev and /proc for every backend;
    MPS, the driver root the base CDI spec mounts and the CDI hook for NVIDIA's only (in the order
    they always had, so the NVIDIA Pod template, and its Pods, stay as they were)."""
    return [
        f"--kubelet-root={plugin.kubelet_root}",
        f"--cdi-dir={plugin.cdi_dir}",
        *([f"--mps-root={plugin.mps_root}"] if nvidia else []),
        "--dev-root=/dev",
        "--proc-root=/proc",
        f"--prepare-lock-timeout={plugin.lock_timeout}",
        *(
            [
                # MPS control daemons outlive the Pod (a rolling update): they start on the host.
                "--daemons-on-host=true",
                f"--driver-root={DRIVER_ROOT_MOUNT}",
                f"--driver-root-on-host={driver_root}",
                f"--host-run={HOST_RUN_MOUNT}",
                f"--driver-capabilities={_capabilities(plugin)}",
                f"--cdi-hook-source={CDI_HOOK_IN_IMAGE}",
            ]
            if nvidia
            else []
        ),
    ]


def _capabilities(plugin: KubeletPluginSettings) -> str:
    """The flag's value: the listed capabilities, or ``all`` (every one the driver root has)."""
    if plugin.driver_capabilities is None:
        return "all"
    return ",".join(capability.value for capability in plugin.driver_capabilities)


def _attribution_args(attribution: AttributionSettings) -> list[str]:
    """Per-Pod attribution rides on the plugin: its host PID namespace and its checkpoint."""
    return [
        f"--attribution-interval={attribution.interval}",
        f"--attribution-max-series={attribution.max_series}",
        f"--usage-status-interval={attribution.usage_status_interval}",
    ]


def _simulate(pod: V1PodSpec, hosts: SimulatedHostsSettings, plugin: KubeletPluginSettings) -> None:
    """Every host path of the handler inside its node's simulated host (:mod:`.simulation`)."""
    node = simulation.node_folder(hosts)
    paths = {
        "--sysfs-root": f"{node}/host/root",
        "--kubelet-root": f"{node}/kubelet/root",
        "--cdi-dir": f"{node}/cdi",
        "--mps-root": f"{node}/mps",
        "--dev-root": f"{node}/host/dev",
        "--proc-root": f"{node}/host/root/proc",
        # The node's stand-in driver (pkg.devcluster.driverroot) and its /run.
        "--driver-root": f"{node}/nvidia-driver",
        "--driver-root-on-host": f"{node}/nvidia-driver",
        "--host-run": f"{node}/run",
    }
    [handler] = pod.containers
    args = []
    for arg in handler.args or []:
        flag = arg.split("=", 1)[0]
        args.append(f"{flag}={paths[flag]}" if flag in paths else arg)
    handler.args = [*args, f"--sim-state-dir={node}/host/nvml"]
    handler.volume_mounts = [
        simulation.mount(hosts, read_only=not plugin.enabled),
        V1VolumeMount(name="tmp", mount_path="/tmp"),
    ]
    pod.volumes = [simulation.volume(hosts), tmp_volume()]


def _serve_the_kubelet(
    pod: V1PodSpec, plugin: KubeletPluginSettings, *, driver_root: str, simulated: bool, nvidia: bool
) -> None:
    """The plugin's host folders at their host paths, root, privileged (see the module docs); on
    simulated hosts the folders are inside the one simulated-hosts mount already. Only NVIDIA's
    plugin gets the MPS folder, the driver root and the host's ``/run``."""
    folders = {
        # The plugin's DRA socket and its node-wide files (checkpoint, node lock).
        "kubelet-plugins": (f"{plugin.kubelet_root}/plugins", "DirectoryOrCreate"),
        # Where the kubelet finds plugins: it must exist (the kubelet creates it).
        "kubelet-plugins-registry": (f"{plugin.kubelet_root}/plugins_registry", "Directory"),
        "cdi": (plugin.cdi_dir, "DirectoryOrCreate"),
        # One folder per MPS-shared card (pipe, log, shm), mounted into the shares by host path.
        "mps": (plugin.mps_root, "DirectoryOrCreate"),
        "host-dev": ("/dev", "Directory"),
    }
    # Read-only, with the host's later mounts: a containerised driver mounts its root when it starts.
    driver_folders = {
        "driver-root": (driver_root, DRIVER_ROOT_MOUNT, "DirectoryOrCreate"),
        "host-run": ("/run", HOST_RUN_MOUNT, "Directory"),
    }
    if not nvidia:
        del folders["mps"]
        driver_folders = {}
    if simulated:
        folders, driver_folders = {}, {}
    [handler] = pod.containers
    # VFIO passthrough binds drivers through sysfs (driver_override, unbind, bind): writable here.
    for mount in handler.volume_mounts or []:
        if mount.name == "host-sys":
            mount.read_only = False
    handler.volume_mounts = [
        *(handler.volume_mounts or []),
        *(V1VolumeMount(name=name, mount_path=path) for name, (path, _) in folders.items()),
        *(
            V1VolumeMount(name=name, mount_path=mount, read_only=True, mount_propagation="HostToContainer")
            for name, (_, mount, _) in driver_folders.items()
        ),
    ]
    pod.volumes = [
        *(pod.volumes or []),
        *(host_path(name, path, kind) for name, (path, kind) in folders.items()),
        *(host_path(name, path, kind) for name, (path, _, kind) in driver_folders.items()),
    ]
    # The host's PID namespace: the daemons of shares are started through the host's init, outside
    # the Pod's cgroups, and found again by PID after a restart (pkg.backends.host_daemons).
    pod.host_pid = True
    pod.security_context = V1PodSecurityContext(
        run_as_non_root=False,
        run_as_user=0,
        run_as_group=0,
        seccomp_profile=V1SeccompProfile(type="RuntimeDefault"),
    )
    handler.security_context = V1SecurityContext(
        privileged=True, allow_privilege_escalation=True, read_only_root_filesystem=True
    )
