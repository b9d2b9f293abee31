"""simulatedHosts (tests and demos): our node components read their node's simulated host, through
one mount at the same path, and nothing of the real host."""

from __future__ import annotations

import pytest
from k8s_fields import spec_of
from pydantic import ValidationError
from test_orchestrator_render import ALL, render

from pkg.gpucontroller.names import Component

HOSTS = "/var/tmp/gpucp/nodes"
NODE = f"{HOSTS}/$(NODE_NAME)"
SIMULATED = {**ALL, "simulatedHosts": {"dir": HOSTS, "pciIds": f"{HOSTS}/pci.ids"}}


def host_paths(pod: object) -> set[str]:
    return {v.host_path.path for v in pod.volumes if v.host_path is not None}  # type: ignore[attr-defined]


def test_the_handler_reads_and_serves_its_nodes_simulated_host() -> None:
    pod = render({**SIMULATED, "gpuHandler": {**ALL["gpuHandler"], "backend": "simulated-nvidia"}})[
        Component.GPU_HANDLER
    ].spec.template.spec
    [handler] = pod.containers
    flags = dict(a.split("=", 1) for a in handler.args)
    assert flags["--sysfs-root"] == f"{NODE}/host/root"
    assert flags["--kubelet-root"] == f"{NODE}/kubelet/root"
    assert flags["--cdi-dir"] == f"{NODE}/cdi"
    assert flags["--mps-root"] == f"{NODE}/mps"
    assert flags["--dev-root"] == f"{NODE}/host/dev"
    assert flags["--proc-root"] == f"{NODE}/host/root/proc"
    assert flags["--sim-state-dir"] == f"{NODE}/host/nvml"
    # One writable mount at its own path (the kubelet dials the socket path the plugin reports).
    assert host_paths(pod) == {HOSTS}
    assert [(m.mount_path, m.read_only) for m in handler.volume_mounts if m.name != "tmp"] == [(HOSTS, False)]
    assert "NODE_NAME" in {e.name for e in handler.env}  # what $(NODE_NAME) expands from
    assert handler.security_context.privileged


def test_the_agent_reads_its_nodes_simulated_host_read_only() -> None:
    pod = render(SIMULATED)[Component.NODE_AGENT].spec.template.spec
    [agent] = pod.containers
    flags = dict(a.split("=", 1) for a in agent.args)
    assert flags["--sysfs-root"] == flags["--host-root"] == f"{NODE}/host/root"
    assert flags["--pci-ids"] == f"{HOSTS}/pci.ids"
    assert host_paths(pod) == {HOSTS}
    assert all(m.read_only for m in agent.volume_mounts if m.name != "tmp")
    assert not agent.security_context.privileged


def test_without_simulated_hosts_nothing_points_at_one() -> None:
    rendered = render(ALL)
    for component in (Component.GPU_HANDLER, Component.NODE_AGENT):
        [container] = spec_of(spec_of(rendered[component]).template).containers
        assert not any("$(NODE_NAME)" in a or "--sim-state-dir" in a for a in container.args)
        assert "/sys" in host_paths(rendered[component].spec.template.spec)


@pytest.mark.parametrize("folder", ["relative/nodes", "/nodes/", "/with space"])
def test_a_folder_that_is_no_host_path_is_refused(folder: str) -> None:
    with pytest.raises(ValidationError, match="simulatedHosts"):
        render({**ALL, "simulatedHosts": {"dir": folder}})
