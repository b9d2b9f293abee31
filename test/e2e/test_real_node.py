"""A real node on this machine: it registers, runs Pods, serves their logs and stops cleanly.

These are the harness's promises the rest of the e2e tier builds on; each is checked against the
real kubelet, containerd, runc and CNI, never against what the harness believes it did.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kubernetes.client import V1Node
from testutil.e2e.pods import logs, run_to_completion, shell_pod
from testutil.k8s_fields import present, spec_of, status_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.images import PAUSE_IMAGE, ImageArchive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE, POD

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"


def _condition(node: V1Node, kind: str) -> str | None:
    return next((c.status for c in status_of(node).conditions or [] if c.type == kind), None)


def test_the_node_registers_as_a_real_kubelet_would(kube: KubeClient, real_node: RealNode) -> None:
    node = kube.get(NODE, real_node.name)
    info = present(status_of(node).node_info)
    assert info.kubelet_version == "v1.37.1"
    assert info.container_runtime_version == "containerd://2.4.2"
    assert _condition(node, "Ready") == "True"
    assert not [t for t in spec_of(node).taints or [] if t.key.startswith("node.kubernetes.io/")]
    addresses = {(a.type, a.address) for a in status_of(node).addresses or []}
    assert ("InternalIP", real_node.kubelet.node_ip) in addresses
    endpoints = present(status_of(node).daemon_endpoints)
    assert present(endpoints.kubelet_endpoint).port == real_node.kubelet.port


def test_a_plain_pod_runs_and_its_log_comes_through_the_api(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, real_node: RealNode
) -> None:
    script = (
        "echo started; "
        "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; "
        "test -s /var/run/secrets/kubernetes.io/serviceaccount/ca.crt && echo ca-present; "
        "ip -4 addr show eth0 | grep -o 'inet [0-9.]*'"
    )
    pod = run_to_completion(kube, namespace, shell_pod("plain", script, node=real_node.name))

    assert status_of(pod).phase == "Succeeded", pod.status
    assert spec_of(pod).node_name == real_node.name
    lines = logs(control_plane, namespace, "plain").splitlines()
    assert lines[:3] == ["started", namespace, "ca-present"]
    # On the node's CNI bridge network, with the address Kubernetes reports.
    assert lines[3] == f"inet {status_of(pod).pod_ip}"
    assert present(status_of(pod).pod_ip).startswith(real_node.containerd.network.subnet.rsplit(".", 2)[0])


def test_a_failing_container_is_reported_with_its_exit_code(
    kube: KubeClient, namespace: str, real_node: RealNode
) -> None:
    pod = run_to_completion(kube, namespace, shell_pod("fails", "echo bad >&2; exit 3", node=real_node.name))

    assert status_of(pod).phase == "Failed"
    [container] = present(status_of(pod).container_statuses)
    assert present(present(container.state).terminated).exit_code == 3


def test_the_simulated_gpu_host_has_the_device_nodes_of_its_cards(real_node: RealNode) -> None:
    dev = real_node.host.dev
    expected = {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}
    assert expected <= {p.name for p in dev.iterdir()}
    for path in real_node.host.device_nodes():
        info = path.stat()
        assert stat.S_ISCHR(info.st_mode), path
        assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (1, 3), path
    # The driver's minor numbers follow PCI address order (the a30-x2 fixture: 3b:00.0, then d8:00.0).
    gpus = real_node.host.root / "proc" / "driver" / "nvidia" / "gpus"
    minors = {
        p.name: (p / "information").read_text().split("Device Minor:")[1].strip() for p in gpus.iterdir()
    }
    assert minors == {"0000:3b:00.0": "0", "0000:d8:00.0": "1"}
    # The MIG capability table and its device nodes, numbered as the NVIDIA driver numbers them.
    table = (real_node.host.root / "proc" / "driver" / "nvidia-caps" / "mig-minors").read_text().splitlines()
    assert table[:4] == ["config 1", "monitor 2", "gpu0/gi0/access 3", "gpu0/gi0/ci0/access 4"]
    assert "gpu1/gi0/access 138" in table
    assert len(table) == 2 + 2 * 15 * 9
    assert (dev / "nvidia-caps" / "nvidia-cap138").is_char_device()


def test_a_node_stops_without_leaving_anything_behind(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, work_dir: Path, images: ImageArchive
) -> None:
    node = RealNode(
        config=NodeConfig(name="e2e-node-stop", gpu_fixture=FIXTURES / "l4"),
        plane=control_plane,
        index=9,
        images=images,
        work_dir=work_dir / "stop-test",
    )
    node.start()
    try:
        kube.create(POD, shell_pod("running", "sleep 3600", node=node.name), namespace=namespace)
        wait_until(
            lambda: status_of(kube.get(POD, "running", namespace)).phase == "Running",
            timeout=60,
            what="a running Pod on the node about to stop",
        )
        assert node.leftovers() != [], "a running node must show up in the checks, or they prove nothing"
    finally:
        node.stop()
    leftovers = node.leftovers()
    node.remove_files()

    assert leftovers == []
    assert not node.base.exists()
    assert not Path("/sys/class/net", node.containerd.network.bridge).exists()
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, node.base)]


def _mentions(proc: Path, folder: Path) -> bool:
    try:
        return str(folder).encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_pods_run_on_the_locally_built_sandbox_image(real_node: RealNode) -> None:
    listed = real_node.containerd.ctr("-n", "k8s.io", "images", "list", "-q").stdout.split()
    assert PAUSE_IMAGE in listed
