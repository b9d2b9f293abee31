"""The node and control plane faults: what each stops, in which order, and what it keeps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_mock import MockerFixture, MockType

from pkg.devcluster import certs
from pkg.devcluster.cluster import ControlPlane, ControlPlaneConfig
from pkg.devcluster.images import ImageArchive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import ManagedProcess


@dataclass
class Rig:
    """A node whose daemons and host-wide clean-ups are mocks, and those mocks."""

    node: RealNode
    kubelet: MockType
    containerd: MockType
    strays: MockType
    unmount: MockType
    plane: MockType


def _plane(mocker: MockerFixture, tmp_path: Path) -> MockType:
    plane: MockType = mocker.MagicMock(spec=ControlPlane)
    plane.config = ControlPlaneConfig(bin_dir=tmp_path / "bin", work_dir=tmp_path / "plane")
    plane.pki = mocker.MagicMock(spec=certs.CertPaths)
    plane.server_url = "https://127.0.0.1:6443"
    plane.apiserver_port = 6443
    plane.kubeconfig = tmp_path / "plane" / "kubeconfig"
    plane.kubeconfig.parent.mkdir(parents=True)
    plane.kubeconfig.write_text(
        json.dumps({"clusters": [{"name": "local", "cluster": {"server": plane.server_url}}], "users": []})
    )
    return plane


def _node(mocker: MockerFixture, tmp_path: Path, config: NodeConfig | None = None) -> Rig:
    mocker.patch("pkg.devcluster.node.host_address", return_value="192.0.2.10")
    plane = _plane(mocker, tmp_path)
    node = RealNode(
        config=config or NodeConfig(name="node-a"),
        plane=plane,
        index=1,
        images=mocker.MagicMock(spec=ImageArchive),
        work_dir=tmp_path / "nodes",
    )
    kubelet = mocker.MagicMock(spec=node.kubelet)
    kubelet.paths = node.kubelet.paths
    kubelet.process = mocker.MagicMock(spec=ManagedProcess)
    containerd = mocker.MagicMock(spec=node.containerd)
    containerd.process = mocker.MagicMock(spec=ManagedProcess)
    containerd.process.running.return_value = True
    mocker.patch.object(node, "kubelet", kubelet)
    mocker.patch.object(node, "containerd", containerd)
    mocker.patch.object(node, "_ready", return_value=True)
    return Rig(
        node=node,
        kubelet=kubelet,
        containerd=containerd,
        strays=mocker.patch.object(node, "_kill_strays"),
        unmount=mocker.patch.object(node, "_unmount_all"),
        plane=plane,
    )


@pytest.mark.parametrize("crash", [True, False])
def test_a_kubelet_restart_stops_it_the_asked_way_and_waits_for_ready(
    mocker: MockerFixture, tmp_path: Path, crash: bool
) -> None:
    rig = _node(mocker, tmp_path)
    node = rig.node
    order = mocker.MagicMock()
    order.attach_mock(rig.kubelet.process.kill, "kill")
    order.attach_mock(rig.kubelet.stop, "stop")
    order.attach_mock(rig.kubelet.start, "start")
    order.attach_mock(rig.kubelet.healthy, "healthy")

    node.restart_kubelet(crash=crash)

    first = "kill" if crash else "stop"
    assert [c[0] for c in order.mock_calls if "." not in c[0]] == [first, "start", "healthy"]
    rig.containerd.process.kill.assert_not_called()


@pytest.mark.parametrize("crash", [True, False])
def test_a_containerd_restart_leaves_the_kubelet_and_the_containers_alone(
    mocker: MockerFixture, tmp_path: Path, crash: bool
) -> None:
    rig = _node(mocker, tmp_path)
    node = rig.node

    node.restart_containerd(crash=crash)

    assert rig.containerd.process.kill.called is crash
    assert rig.containerd.stop.called is not crash
    rig.containerd.start.assert_called_once_with()
    rig.containerd.remove_all_tasks.assert_not_called()
    rig.containerd.remove_all_containers.assert_not_called()
    rig.kubelet.process.kill.assert_not_called()


def test_a_reboot_kills_everything_first_then_clears_volatile_state_then_boots(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    rig = _node(mocker, tmp_path)
    node = rig.node
    netns = [Path("/var/run/netns/cni-1234")]
    rig.containerd.sandbox_netns.return_value = netns
    power_cycle = mocker.patch("pkg.devcluster.node.hostreset.power_cycle", return_value="boot-2")
    remove_netns = mocker.patch("pkg.devcluster.node._remove_netns")
    order = mocker.MagicMock()
    for name, mock in {
        "netns": rig.containerd.sandbox_netns,
        "kill kubelet": rig.kubelet.process.kill,
        "kill tasks": rig.containerd.remove_all_tasks,
        "kill containerd": rig.containerd.process.kill,
        "strays": rig.strays,
        "unmount": rig.unmount,
        "remove netns": remove_netns,
        "clear containerd": rig.containerd.clear_volatile_state,
        "power cycle": power_cycle,
        "start containerd": rig.containerd.start,
        "start kubelet": rig.kubelet.start,
    }.items():
        order.attach_mock(mock, name.replace(" ", "_"))
    for folder in (node.base / "run" / "nvidia", node.base / "mps" / "card", node.cdi_dir):
        folder.mkdir(parents=True)
        (folder / "file").write_text("x")
    kept = node.kubelet.paths.root / "plugins" / "gpu.deckhouse.io" / "checkpoint.json"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")

    node.reboot()

    assert [c[0] for c in order.mock_calls if "." not in c[0]] == [
        "netns",
        "kill_kubelet",
        "kill_tasks",
        "kill_containerd",
        "strays",
        "unmount",
        "remove_netns",
        "clear_containerd",
        "power_cycle",
        "start_containerd",
        "start_kubelet",
    ]
    remove_netns.assert_called_once_with(netns)
    assert not (node.base / "run").exists()
    assert not (node.base / "mps").exists()
    assert not node.cdi_dir.exists()
    assert kept.read_text() == "{}"  # the kubelet's root is on disk: the checkpoint survives


def test_a_reboot_keeps_the_plugin_folder_s_mount(mocker: MockerFixture, tmp_path: Path) -> None:
    rig = _node(mocker, tmp_path, NodeConfig(name="node-a", plugin_folder_mib=4))
    node = rig.node
    mocker.patch("pkg.devcluster.node.hostreset.power_cycle", return_value="boot-2")

    node.reboot()

    rig.unmount.assert_called_once_with(
        keep=frozenset({str(node.kubelet.paths.root), str(node.plugin_folder)})
    )


def _mount_table(mocker: MockerFixture, rig: Rig) -> tuple[list[str], list[str]]:
    """The node's mounts as the kernel would list them (parents first) and the unmounts made, in
    order, through the real ``_unmount_all``."""
    node = rig.node
    mocker.stop(rig.unmount)
    root = str(node.kubelet.paths.root)
    volume = f"{root}/pods/uid-1/volumes/kubernetes.io~projected/kube-api-access"
    mounts = [root, str(node.plugin_folder), volume]
    unmounted: list[str] = []

    def unmount(point: str) -> None:
        unmounted.append(point)
        mounts[:] = [m for m in mounts if m != point and not m.startswith(point + "/")]

    mocker.patch.object(node, "_mounts", side_effect=lambda: list(mounts))
    mocker.patch("pkg.devcluster.node._unmount", side_effect=unmount)
    return mounts, unmounted


def test_a_reboot_keeps_the_plugin_folder_s_tmpfs_and_the_root_bind_that_carries_it(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    rig = _node(mocker, tmp_path, NodeConfig(name="node-a", plugin_folder_mib=4))
    node = rig.node
    mocker.patch("pkg.devcluster.node.hostreset.power_cycle", return_value="boot-2")
    mounts, unmounted = _mount_table(mocker, rig)

    node.reboot()

    # A Pod's volume goes (tmpfs on a real node); the root's bind is not unmounted, since that
    # would detach the plugin folder's tmpfs with it.
    assert len(unmounted) == 1
    assert "/pods/" in unmounted[0]
    assert mounts == [str(node.kubelet.paths.root), str(node.plugin_folder)]


def test_a_stop_unmounts_the_plugin_folder_before_the_root_bind_over_it(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    rig = _node(mocker, tmp_path, NodeConfig(name="node-a", plugin_folder_mib=4))
    node = rig.node
    rig.kubelet.process.running.return_value = False
    mocker.patch.object(node, "_delete_bridge")
    mounts, unmounted = _mount_table(mocker, rig)

    node.stop()

    assert unmounted.index(str(node.plugin_folder)) < unmounted.index(str(node.kubelet.paths.root))
    assert mounts == []


def test_a_reboot_of_a_node_whose_containerd_is_down_still_boots(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    rig = _node(mocker, tmp_path)
    node = rig.node
    rig.containerd.process.running.return_value = False
    mocker.patch("pkg.devcluster.node.hostreset.power_cycle", return_value="boot-2")

    node.reboot()

    rig.containerd.sandbox_netns.assert_not_called()
    rig.containerd.remove_all_tasks.assert_not_called()
    rig.containerd.start.assert_called_once_with()
    rig.kubelet.start.assert_called_once_with()


def test_a_node_with_an_api_link_sends_its_clients_through_it(mocker: MockerFixture, tmp_path: Path) -> None:
    rig = _node(mocker, tmp_path, NodeConfig(name="node-a", api_link=True))
    node = rig.node
    assert node.api_link is not None
    node.api_link.start()
    try:
        node._write_component_kubeconfig()  # what start does
        config = json.loads(node.component_kubeconfig.read_text())
    finally:
        node.api_link.stop()

    assert node.api_link.upstream_port == 6443
    assert config["clusters"][0]["cluster"]["server"] == node.api_link.url
    assert node.component_kubeconfig != rig.plane.kubeconfig


def test_a_node_without_an_api_link_uses_the_admin_kubeconfig(mocker: MockerFixture, tmp_path: Path) -> None:
    rig = _node(mocker, tmp_path)
    node = rig.node

    assert node.api_link is None
    assert node.component_kubeconfig == tmp_path / "plane" / "kubeconfig"


def _control_plane(mocker: MockerFixture, tmp_path: Path) -> ControlPlane:
    mocker.patch("pkg.devcluster.cluster.release_of_binary")
    plane = ControlPlane(ControlPlaneConfig(bin_dir=tmp_path, work_dir=tmp_path / "plane"))
    plane.processes = {
        name: mocker.MagicMock(spec=ManagedProcess, running=mocker.MagicMock(return_value=True))
        for name in ("etcd", "kube-apiserver")
    }
    mocker.patch.object(plane, "_get", return_value="ok")
    mocker.patch.object(plane, "_http_ok", return_value=True)
    return plane


@pytest.mark.parametrize("crash", [True, False])
def test_an_apiserver_restart_keeps_etcd(mocker: MockerFixture, tmp_path: Path, crash: bool) -> None:
    plane = _control_plane(mocker, tmp_path)
    apiserver, etcd = plane.processes["kube-apiserver"], plane.processes["etcd"]

    plane.restart_apiserver(crash=crash)

    assert apiserver.kill.called is crash  # type: ignore[attr-defined]
    assert apiserver.stop.called is not crash  # type: ignore[attr-defined]
    apiserver.start.assert_called_once_with()  # type: ignore[attr-defined]
    etcd.stop.assert_not_called()  # type: ignore[attr-defined]
    etcd.kill.assert_not_called()  # type: ignore[attr-defined]


def test_an_etcd_restart_waits_for_the_apiserver_to_reach_it_again(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    plane = _control_plane(mocker, tmp_path)
    answers = iter(["etcd failed", "etcd failed", "ok"])
    mocker.patch.object(plane, "_get", side_effect=lambda path: next(answers))
    etcd, apiserver = plane.processes["etcd"], plane.processes["kube-apiserver"]

    plane.restart_etcd()

    etcd.kill.assert_called_once_with()  # type: ignore[attr-defined]
    etcd.start.assert_called_once_with()  # type: ignore[attr-defined]
    apiserver.start.assert_not_called()  # type: ignore[attr-defined]
    assert next(answers, None) is None  # it waited until the API server was ready


def test_the_plugin_folder_s_tmpfs_goes_under_a_root_already_bound_and_shared(
    mocker: MockerFixture, tmp_path: Path
) -> None:
    """The kubelet binds its root onto itself at start unless the root's mount is shared already;
    that bind would hide the tmpfs, so the root must be bound and made shared before the tmpfs."""
    rig = _node(mocker, tmp_path, NodeConfig(name="node-a", plugin_folder_mib=4))
    node = rig.node
    mocker.patch("pkg.devcluster.node.os.path.ismount", return_value=False)
    run = mocker.patch("pkg.devcluster.node.subprocess.run")

    node._mount_plugin_folder(4)

    root = str(node.kubelet.paths.root)
    assert [c.args[0] for c in run.call_args_list] == [
        ["mount", "--bind", root, root],
        ["mount", "--make-rshared", root],
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0750", "tmpfs", str(node.plugin_folder)],
    ]
