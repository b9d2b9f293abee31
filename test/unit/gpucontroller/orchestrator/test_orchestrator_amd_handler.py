"""One release for NVIDIA and AMD nodes: with ``gpuHandler.amd`` on, a second gpu-handler DaemonSet
runs the AMD backend on the nodes with AMD cards only, without NVIDIA's pieces, and the NVIDIA one
moves off those nodes; with it off, the NVIDIA DaemonSet is the one rendered before."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1PodSpec
from test_orchestrator_render import ALL, render
from test_orchestrator_simulated_hosts import HOSTS, NODE, SIMULATED, host_paths
from testutil.k8s_fields import meta, name_of, present, spec_of, template_pod

from pkg.gpucontroller.names import Component

WITH_AMD: dict[str, Any] = {**ALL, "gpuHandler": {**ALL["gpuHandler"], "amd": {"enabled": True}}}
NVIDIA_ONLY_FLAGS = {
    "--mps-root",
    "--daemons-on-host",
    "--driver-root",
    "--driver-root-on-host",
    "--host-run",
    "--driver-capabilities",
    "--cdi-hook-source",
}


def _flags(pod: V1PodSpec) -> dict[str, str]:
    [handler] = pod.containers
    return dict(a.split("=", 1) for a in present(handler.args))


def test_without_amd_the_handler_is_the_one_rendered_before() -> None:
    assert Component.GPU_HANDLER_AMD not in render(ALL)
    assert (
        render(ALL)[Component.GPU_HANDLER]
        == render({**ALL, "gpuHandler": {**ALL["gpuHandler"], "amd": {"enabled": False}}})[
            Component.GPU_HANDLER
        ]
    )


def test_each_vendor_gets_a_daemon_set_on_its_own_nodes() -> None:
    rendered = render(WITH_AMD)
    assert name_of(rendered[Component.GPU_HANDLER_AMD]) == "gcp-gpu-handler-amd"
    assert template_pod(rendered[Component.GPU_HANDLER]).node_selector == {
        "pool": "gpu",
        "gpu.deckhouse.io/driver-ready": "true",
        "gpu.deckhouse.io/nvidia.present": "true",
    }
    assert template_pod(rendered[Component.GPU_HANDLER_AMD]).node_selector == {
        "pool": "gpu",
        "gpu.deckhouse.io/driver-ready": "true",
        "gpu.deckhouse.io/amd.present": "true",
    }


def test_the_two_daemon_sets_never_select_each_others_pods() -> None:
    rendered = render(WITH_AMD)
    nvidia = present(spec_of(rendered[Component.GPU_HANDLER]).selector).match_labels
    amd = present(spec_of(rendered[Component.GPU_HANDLER_AMD]).selector).match_labels
    assert nvidia != amd
    amd_pod_labels = present(meta(present(spec_of(rendered[Component.GPU_HANDLER_AMD]).template)).labels)
    assert not present(nvidia).items() <= amd_pod_labels.items()


def test_the_amd_handler_runs_the_amd_backend_without_nvidia_pieces() -> None:
    pod = template_pod(render(WITH_AMD)[Component.GPU_HANDLER_AMD])
    [handler] = pod.containers
    flags = _flags(pod)
    assert handler.command == ["gpu-handler"]
    assert flags["--backend"] == "amd"
    assert NVIDIA_ONLY_FLAGS.isdisjoint(flags)
    assert {"--kubelet-root", "--cdi-dir", "--dev-root", "--proc-root", "--attribution-interval"} <= set(
        flags
    )
    assert pod.runtime_class_name is None
    assert flags["--imex-channels"] == "0"  # IMEX channels are NVIDIA's
    assert not any(e.name.startswith("NVIDIA_") for e in present(handler.env))
    assert host_paths(pod) == {
        "/sys",
        "/var/lib/kubelet/plugins",
        "/var/lib/kubelet/plugins_registry",
        "/var/run/cdi",
        "/dev",
    }
    # The plugin's needs are the same: root, privileged, the host's PIDs (attribution).
    assert present(handler.security_context).privileged
    assert pod.host_pid
    assert pod.service_account_name == "handler-sa"


def test_the_nvidia_handler_keeps_its_pieces_beside_amd() -> None:
    pod = template_pod(render(WITH_AMD)[Component.GPU_HANDLER])
    flags = _flags(pod)
    assert flags["--backend"] == "nvidia"
    assert set(flags) >= NVIDIA_ONLY_FLAGS
    assert pod.runtime_class_name == "nvidia"


def test_the_amd_handler_follows_the_handler() -> None:
    off = {**ALL, "gpuHandler": {**WITH_AMD["gpuHandler"], "enabled": False}}
    assert not {Component.GPU_HANDLER, Component.GPU_HANDLER_AMD} & set(render(off))


def test_the_simulated_amd_handler_reads_its_nodes_simulated_host() -> None:
    spec = {
        **SIMULATED,
        "gpuHandler": {**ALL["gpuHandler"], "amd": {"enabled": True, "backend": "simulated-amd"}},
    }
    pod = template_pod(render(spec)[Component.GPU_HANDLER_AMD])
    flags = _flags(pod)
    assert flags["--backend"] == "simulated-amd"
    assert flags["--sysfs-root"] == f"{NODE}/host/root"
    assert flags["--dev-root"] == f"{NODE}/host/dev"
    assert flags["--sim-state-dir"] == f"{NODE}/host/nvml"
    assert host_paths(pod) == {HOSTS}
