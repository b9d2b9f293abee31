"""Simulated GPU hosts (tests and demos only): what gpu-node-agent and gpu-handler read instead of
the node's own ``/sys``, ``/dev``, ``/proc``, kubelet and CDI folders (``simulatedHosts`` of the
configuration document, :class:`~api.gpu.v1alpha1.SimulatedHostsSettings`).

The whole folder of simulated hosts is mounted at its own path: CDI specs name device nodes by host
path and the kubelet dials the socket path the plugin reports, so inside and outside must agree.
A DaemonSet has one template for every node, so each Pod finds its own node's folder through
``$(NODE_NAME)``, which Kubernetes expands in arguments from the container's environment.
"""

from __future__ import annotations

from kubernetes.client import V1Volume, V1VolumeMount

from api.gpu.v1alpha1 import SimulatedHostsSettings
from pkg.gpucontroller.orchestrator.render.common import host_path

VOLUME = "simulated-hosts"


def node_folder(hosts: SimulatedHostsSettings) -> str:
    """The Pod's own node's folder (``$(NODE_NAME)`` is expanded by the kubelet)."""
    return f"{hosts.dir}/$(NODE_NAME)"


def sysfs_root(hosts: SimulatedHostsSettings) -> str:
    return f"{node_folder(hosts)}/host/root"


def volume(hosts: SimulatedHostsSettings) -> V1Volume:
    return host_path(VOLUME, hosts.dir, "Directory")


def mount(hosts: SimulatedHostsSettings, *, read_only: bool) -> V1VolumeMount:
    return V1VolumeMount(name=VOLUME, mount_path=hosts.dir, read_only=read_only)
