"""The soak's faults call the right devcluster primitive on the right target, in turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from soak import faults
from soak.cluster import DRA_REPLICAS
from soak.faults import (
    OTHER_DRIVER_VERSION,
    ApiCut,
    CardOffBus,
    DriverReload,
    KillController,
    KillDraLeader,
    KillHandler,
    KillNodeAgent,
    PluginFolderFull,
    PrimitiveMissingError,
    RebootNode,
    RestartApiserver,
    RestartContainerd,
    RestartEtcd,
    RestartKubelet,
)

from pkg.backends.simulated.data import DRIVER_VERSION


def soak_node(mocker: MockerFixture, name: str) -> Any:
    node = mocker.MagicMock(name=name)
    node.name = name
    node.component_names = [f"gpu-node-agent[{name}]", f"gpu-handler[{name}]"]
    return node


@pytest.fixture
def cluster(mocker: MockerFixture) -> Any:
    cluster = mocker.MagicMock(name="cluster")
    cluster.nodes = [soak_node(mocker, "node-a"), soak_node(mocker, "node-b")]
    cluster.component_names = ["gpu-controller", *DRA_REPLICAS]
    return cluster


def test_every_fault_of_the_issue_has_a_kind_with_its_duration() -> None:
    assert faults.durations() == {
        "kill-gpu-controller": 0.0,
        "kill-gpu-dra-controller": 0.0,
        "kill-gpu-handler": 0.0,
        "kill-gpu-node-agent": 0.0,
        "restart-apiserver": 0.0,
        "restart-etcd": 0.0,
        "restart-kubelet": 0.0,
        "restart-containerd": 0.0,
        "reboot-node": 0.0,
        "plugin-folder-full": 20.0,
        "api-cut": 30.0,
        "card-off-bus": 20.0,
        "driver-reload": 0.0,
    }


def test_kill_gpu_controller(cluster: Any) -> None:
    assert KillController(cluster).strike() == "gpu-controller"
    cluster.supervisor.kill.assert_called_once_with("gpu-controller")


def test_kill_dra_controller_kills_the_leader(cluster: Any) -> None:
    cluster.dra_leader.return_value = DRA_REPLICAS[1]

    assert KillDraLeader(cluster).strike() == DRA_REPLICAS[1]
    cluster.supervisor.kill.assert_called_once_with(DRA_REPLICAS[1])


def test_kill_dra_controller_without_a_leader_takes_the_replicas_in_turn(cluster: Any) -> None:
    cluster.dra_leader.return_value = None
    fault = KillDraLeader(cluster)

    assert "no leader seen" in fault.strike()
    fault.strike()

    assert [c.args for c in cluster.supervisor.kill.call_args_list] == [
        (DRA_REPLICAS[0],),
        (DRA_REPLICAS[1],),
    ]


@pytest.mark.parametrize(
    ("kind", "component"), [(KillHandler, "gpu-handler"), (KillNodeAgent, "gpu-node-agent")]
)
def test_node_component_kills_go_round_the_nodes(
    cluster: Any, kind: type[faults.FaultKind], component: str
) -> None:
    fault = kind(cluster)

    hits = [fault.strike() for _ in range(3)]

    assert hits == [f"{component}[node-a]", f"{component}[node-b]", f"{component}[node-a]"]
    assert [c.args for c in cluster.supervisor.kill.call_args_list] == [(h,) for h in hits]
    assert fault.involved == ["gpu-node-agent[node-a]", "gpu-handler[node-a]"]


def test_control_plane_restarts_crash_the_process(cluster: Any) -> None:
    RestartApiserver(cluster).strike()
    RestartEtcd(cluster).strike()

    cluster.plane.restart_apiserver.assert_called_once_with(crash=True)
    cluster.plane.restart_etcd.assert_called_once_with(crash=True)


def test_kubelet_and_containerd_restarts_crash_them_node_by_node(cluster: Any) -> None:
    kubelet, containerd = RestartKubelet(cluster), RestartContainerd(cluster)

    assert kubelet.strike() == "kubelet[node-a]"
    assert kubelet.strike() == "kubelet[node-b]"
    assert containerd.strike() == "containerd[node-a]"

    a, b = cluster.nodes
    a.node.restart_kubelet.assert_called_once_with(crash=True)
    b.node.restart_kubelet.assert_called_once_with(crash=True)
    a.node.restart_containerd.assert_called_once_with(crash=True)
    b.node.restart_containerd.assert_not_called()


def test_reboot_kills_the_nodes_components_unsupervised_then_reboots(
    cluster: Any, mocker: MockerFixture
) -> None:
    order = mocker.MagicMock()
    agent, handler = mocker.MagicMock(name="agent"), mocker.MagicMock(name="handler")
    order.attach_mock(agent.kill, "agent_kill")
    order.attach_mock(handler.kill, "handler_kill")
    node = cluster.nodes[0]
    order.attach_mock(node.node.reboot, "reboot")
    paused = cluster.supervisor.paused

    def enter() -> list[Any]:
        order.paused()
        return [agent, handler]

    def leave(*_: object) -> None:
        order.resumed()

    paused.return_value.__enter__.side_effect = enter
    paused.return_value.__exit__.side_effect = leave

    assert RebootNode(cluster).strike() == "node-a"

    paused.assert_called_once_with("gpu-node-agent[node-a]", "gpu-handler[node-a]")
    assert [c[0] for c in order.mock_calls] == ["paused", "handler_kill", "agent_kill", "reboot", "resumed"]


def test_plugin_folder_fills_on_strike_and_frees_on_heal_on_the_same_node(cluster: Any) -> None:
    fault = PluginFolderFull(cluster)

    assert fault.strike() == "node-a"
    node = cluster.nodes[0].node
    node.fill_plugin_folder.assert_called_once_with()
    node.free_plugin_folder.assert_not_called()

    fault.heal()

    node.free_plugin_folder.assert_called_once_with()
    cluster.nodes[1].node.free_plugin_folder.assert_not_called()


def test_api_cut_cuts_and_restores_the_nodes_link(cluster: Any) -> None:
    fault = ApiCut(cluster)

    fault.strike()
    link = cluster.nodes[0].node.api_link
    link.cut.assert_called_once_with()
    fault.heal()

    link.restore.assert_called_once_with()


def test_api_cut_without_a_link_says_the_primitive_is_missing(cluster: Any) -> None:
    cluster.nodes[0].node.api_link = None

    with pytest.raises(PrimitiveMissingError, match="node-a has no api_link"):
        ApiCut(cluster).strike()


def test_card_off_bus_unplugs_then_replugs_the_same_card(
    cluster: Any, mocker: MockerFixture, tmp_path: Path
) -> None:
    mocker.patch.object(faults, "nvidia_cards", return_value=["0000:17:00.0", "0000:65:00.0"])
    fault = CardOffBus(cluster)

    assert fault.strike() == "node-a 0000:17:00.0"
    host = cluster.nodes[0].node.host
    host.unplug_card.assert_called_once_with("0000:17:00.0")
    fault.heal()
    host.replug_card.assert_called_once_with("0000:17:00.0")

    assert fault.strike() == "node-b 0000:17:00.0"
    fault.heal()
    assert fault.strike() == "node-a 0000:65:00.0"  # the next card once every node had its turn


def test_card_off_bus_passes_over_a_node_whose_cards_are_on_another_driver(
    cluster: Any, mocker: MockerFixture
) -> None:
    # node-a is a VM host: its card is bound to vfio-pci, so the nvidia driver cannot lose it.
    cards = {id(cluster.nodes[0].node.host.root): [], id(cluster.nodes[1].node.host.root): ["0000:17:00.0"]}
    mocker.patch.object(faults, "nvidia_cards", side_effect=lambda root: cards[id(root)])
    fault = CardOffBus(cluster)

    assert fault.strike() == "node-b 0000:17:00.0"
    cluster.nodes[0].node.host.unplug_card.assert_not_called()
    fault.heal()
    cluster.nodes[1].node.host.replug_card.assert_called_once_with("0000:17:00.0")


def test_card_off_bus_where_no_node_has_an_nvidia_card_fails_saying_so(
    cluster: Any, mocker: MockerFixture
) -> None:
    mocker.patch.object(faults, "nvidia_cards", return_value=[])

    with pytest.raises(RuntimeError, match="no soak node has a card bound to the nvidia driver"):
        CardOffBus(cluster).strike()


def test_driver_reload_goes_to_the_other_version_and_back_per_node(cluster: Any) -> None:
    fault = DriverReload(cluster)

    hits = [fault.strike() for _ in range(4)]

    assert hits == [
        f"node-a {OTHER_DRIVER_VERSION}",
        f"node-b {OTHER_DRIVER_VERSION}",
        f"node-a {DRIVER_VERSION}",
        f"node-b {DRIVER_VERSION}",
    ]
    assert [c.args for c in cluster.nodes[0].components.reload_driver.call_args_list] == [
        (OTHER_DRIVER_VERSION,),
        (DRIVER_VERSION,),
    ]


class _Bare:
    """An object without any primitive."""


def test_a_missing_primitive_fails_the_strike_naming_it() -> None:
    with pytest.raises(PrimitiveMissingError, match=r"primitive missing: _Bare\.reload_driver"):
        faults.primitive(_Bare(), "reload_driver")


def test_node_faults_begin_at_different_nodes_so_one_strike_each_spreads_them(cluster: Any) -> None:
    kinds = faults.all_kinds(cluster)

    firsts = [kinds[name].strike() for name in ("restart-kubelet", "restart-containerd")]

    assert firsts == ["kubelet[node-a]", "containerd[node-b]"]  # the 3rd and 4th node faults
