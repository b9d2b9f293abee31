"""simulatedHosts (tests and demos): our node components read their node's simulated host, through
one mount at the same path, and nothing of the real host."""

from __future__ import annotations

import pytest
from kubernetes.client import V1PodSpec
from pydantic import ValidationError
from test_orchestrator_render import ALL, render
from testutil.k8s_fields import present, template_pod

from pkg.gpucontroller.names import Component

HOSTS = "/var/tmp/gpucp/nodes"
NODE = f"{HOSTS}/$(NODE_NAME)"
SIMULATED = {**ALL, "simulatedHosts": {"dir": HOSTS, "pciIds": f"{HOSTS}/pci.ids"}}


def host_paths(pod: V1PodSpec) -> set[str]:
    return {v.host_path.path for v in present(pod.volumes) if v.host_path is not None}


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in args)


def test_the_handler_reads_and_serves_its_nodes_simulated_host() -> None:
    pod = template_pod(
        render({**SIMULATED, "gpuHandler": {**ALL["gpuHandler"], "backend": "simulated-nvidia"}})[
            Component.GPU_HANDLER
        ]
    )
    [handler] = pod.containers
    flags = _flags(present(handler.args))
    assert flags["--sysfs-root"] == f"{NODE}/host/root"
    assert flags["--kubelet-root"] == f"{NODE}/kubelet/root"
    assert flags["--cdi-dir"] == f"{NODE}/cdi"
    assert flags["--mps-root"] == f"{NODE}/mps"
    assert flags["--dev-root"] == f"{NODE}/host/dev"
    assert flags["--proc-root"] == f"{NODE}/host/root/proc"
    assert flags["--sim-state-dir"] == f"{NODE}/host/nvml"
    # One writable mount at its own path (the kubelet dials the socket path the plugin reports).
    assert host_paths(pod) == {HOSTS}
    assert [(m.mount_path, m.read_only) for m in present(handler.volume_mounts) if m.name != "tmp"] == [
        (HOSTS, False)
    ]
    assert "NODE_NAME" in {e.name for e in present(handler.env)}  # what $(NODE_NAME) expands from
    assert present(handler.security_context).privileged


def test_the_agent_reads_its_nodes_simulated_host_read_only() -> None:
    pod = template_pod(render(SIMULATED)[Component.NODE_AGENT])
    [agent] = pod.containers
    flags = _flags(present(agent.args))
    assert flags["--sysfs-root"] == flags["--host-root"] == f"{NODE}/host/root"
    assert flags["--pci-ids"] == f"{HOSTS}/pci.ids"
    assert host_paths(pod) == {HOSTS}
    assert all(m.read_only for m in present(agent.volume_mounts) if m.name != "tmp")
    assert not present(agent.security_context).privileged


def test_without_simulated_hosts_nothing_points_at_one() -> None:
    rendered = render(ALL)
    for component in (Component.GPU_HANDLER, Component.NODE_AGENT):
        [container] = template_pod(rendered[component]).containers
        assert not any("$(NODE_NAME)" in a or "--sim-state-dir" in a for a in container.args or [])
        assert "/sys" in host_paths(template_pod(rendered[component]))


@pytest.mark.parametrize("folder", ["relative/nodes", "/nodes/", "/with space"])
def test_a_folder_that_is_no_host_path_is_refused(folder: str) -> None:
    with pytest.raises(ValidationError, match="simulatedHosts"):
        render({**ALL, "simulatedHosts": {"dir": folder}})
