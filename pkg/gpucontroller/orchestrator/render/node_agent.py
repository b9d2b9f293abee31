"""gpu-node-agent on every node but the control plane
(docs/architecture.md#node-agent-owns-its-nodes-inventory).

What the Pod needs from the host, and nothing more: the host's sysfs read-only at ``/host/sys``
(PCI devices, IOMMU groups, DMI names), its ``/etc/os-release``, ``/proc/sys/kernel`` and
``/proc/cpuinfo`` read-only under ``/host`` (single paths rather than the host's root; the CPU
flags show whether a hypervisor runs below, and bare metal needs their positive evidence), and the
host's network namespace only for kernel uevents (``udev``), which the kernel sends to the initial
namespace alone. No privileges, capabilities or root: every file it reads is world-readable.
"""

from __future__ import annotations

from kubernetes.client import V1DaemonSet, V1PodSpec, V1VolumeMount

from pkg.gpucontroller.names import Component
from pkg.gpucontroller.orchestrator.render import metrics_proxy, simulation
from pkg.gpucontroller.orchestrator.render.common import (
    RenderContext,
    daemon_set,
    gate_selector,
    host_path,
    logging_env,
    not_on_control_plane,
    our_binary,
    restricted_pod,
    tmp_volume,
)


def render(context: RenderContext) -> V1DaemonSet:
    settings = context.spec.node_agent
    agent = our_binary(
        settings,
        name=Component.NODE_AGENT.value,
        args=[
            "--sysfs-root=/host/sys",
            "--host-root=/host",
            f"--resync-period={settings.resync_period}",
            f"--udev={str(settings.udev).lower()}",
            f"--metrics-bind-address=:{settings.metrics_port}",
        ],
        env=logging_env(context.spec),
        metrics_port=settings.metrics_port,
        mounts=[
            V1VolumeMount(name="host-sys", mount_path="/host/sys", read_only=True),
            V1VolumeMount(name="host-os-release", mount_path="/host/etc/os-release", read_only=True),
            V1VolumeMount(name="host-kernel", mount_path="/host/proc/sys/kernel", read_only=True),
            V1VolumeMount(name="host-cpuinfo", mount_path="/host/proc/cpuinfo", read_only=True),
        ],
    )
    pod = V1PodSpec(
        containers=[agent],
        security_context=restricted_pod(),
        node_selector=gate_selector(None, settings),
        affinity=not_on_control_plane(),
        # A file, bind-mounted: a symlinked /etc/os-release is resolved on the host.
        volumes=[
            host_path("host-sys", "/sys", "Directory"),
            host_path("host-os-release", "/etc/os-release", "File"),
            host_path("host-kernel", "/proc/sys/kernel", "Directory"),
            host_path("host-cpuinfo", "/proc/cpuinfo", "File"),
            tmp_volume(),
        ],
    )
    if context.spec.simulated_hosts is not None:
        _simulate(pod, context)
    if context.spec.metrics_proxy is not None:
        metrics_proxy.put_in_front(pod, context.spec.metrics_proxy)
    if settings.udev:
        pod.host_network = True
        pod.dns_policy = "ClusterFirstWithHostNet"
    return daemon_set(context, Component.NODE_AGENT, settings, pod=pod)


def _simulate(pod: V1PodSpec, context: RenderContext) -> None:
    """The node's simulated host in place of the host's files (:mod:`.simulation`)."""
    hosts = context.spec.simulated_hosts
    assert hosts is not None
    [agent] = pod.containers
    root = simulation.sysfs_root(hosts)
    args = [a for a in agent.args or [] if not a.startswith(("--sysfs-root=", "--host-root="))]
    agent.args = [f"--sysfs-root={root}", f"--host-root={root}", *args]
    if hosts.pci_ids:
        agent.args.append(f"--pci-ids={hosts.pci_ids}")
    agent.volume_mounts = [
        simulation.mount(hosts, read_only=True),
        V1VolumeMount(name="tmp", mount_path="/tmp"),
    ]
    pod.volumes = [simulation.volume(hosts), tmp_volume()]
