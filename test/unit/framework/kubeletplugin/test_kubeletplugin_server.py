"""The kubelet plugin served for real on unix sockets and called the way the kubelet calls it."""

from __future__ import annotations

import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf.message import Message

from pkg.framework.kubeletplugin.server import KubeletPlugin
from pkg.framework.kubeletplugin.sockets import GRPC_PATH_MAX, remove_dead_sockets, socket_paths
from pkg.framework.kubeletplugin.types import (
    ClaimRef,
    DeviceHealth,
    HealthBoard,
    HealthStatus,
    PluginIdentity,
    PreparedDevice,
    PrepareOutcome,
)
from pkg.framework.kubeletplugin.wire import dra_health_v1_pb2 as health_v1
from pkg.framework.kubeletplugin.wire import dra_health_v1alpha1_pb2 as health_v1alpha1
from pkg.framework.kubeletplugin.wire import dra_v1_pb2 as v1
from pkg.framework.kubeletplugin.wire import dra_v1beta1_pb2 as v1beta1
from pkg.framework.kubeletplugin.wire import pluginregistration_v1_pb2 as registration

DRIVER = "gpu.deckhouse.io"
M = TypeVar("M", bound=Message)


class RecordingDriver:
    """Prepares a claim named ``ok-*``, fails ``bad-*``, skips ``silent-*``, raises for ``boom``."""

    def __init__(self) -> None:
        self.unprepared: list[str] = []

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        if any(c.name == "boom" for c in claims):
            raise RuntimeError("backend exploded")
        outcomes = {}
        for claim in claims:
            if claim.name.startswith("ok"):
                device = PreparedDevice(
                    pool="gpus/n1",
                    device="gpu-0000-3b-00-0",
                    cdi_device_ids=(f"k8s.gpu.deckhouse.io/claim={claim.uid}-gpu",),
                    requests=("gpu",),
                    share_id="share-1",
                )
                outcomes[claim.uid] = PrepareOutcome(devices=(device,))
            elif claim.name.startswith("bad"):
                outcomes[claim.uid] = PrepareOutcome.failed(f"claim {claim}: card busy")
        return outcomes

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        self.unprepared += [c.uid for c in claims]
        return {c.uid: "still in use" if c.name.startswith("bad") else "" for c in claims}


@pytest.fixture
def kubelet_root() -> Iterator[Path]:
    """A short folder: pytest's own tmp_path would push socket paths past the 108-byte limit."""
    root = Path(tempfile.mkdtemp(prefix="kp-"))
    (root / "plugins_registry").mkdir()
    (root / "plugins").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def board() -> HealthBoard:
    return HealthBoard()


@pytest.fixture
def plugin(kubelet_root: Path, board: HealthBoard) -> Iterator[KubeletPlugin]:
    served = KubeletPlugin(
        identity=PluginIdentity(driver=DRIVER, instance="pod-uid-1"),
        kubelet_root=kubelet_root,
        driver=RecordingDriver(),
        health=board,
        stop_grace=1.0,
    )
    served.start()
    yield served
    served.stop()


def _call(path: Path, method: str, request: Message, response_type: type[M]) -> M:
    with grpc.insecure_channel(f"unix://{path}") as channel:
        stub = channel.unary_unary(
            method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        response: M = stub(request, timeout=5)
        return response


def _claims(module: ModuleType, *names: str) -> list[Any]:
    return [module.Claim(namespace="ns", name=name, uid=f"uid-{name}") for name in names]


def test_the_kubelet_learns_who_the_plugin_is(plugin: KubeletPlugin) -> None:
    info = _call(
        plugin.paths.registration,
        "/pluginregistration.Registration/GetInfo",
        registration.InfoRequest(),
        registration.PluginInfo,
    )

    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(plugin.paths.dra)
    assert list(info.supported_versions) == [
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
    ]


def test_registration_status_is_remembered(plugin: KubeletPlugin) -> None:
    path, method = plugin.paths.registration, "/pluginregistration.Registration/NotifyRegistrationStatus"
    _call(
        path,
        method,
        registration.RegistrationStatus(plugin_registered=False, error="no"),
        registration.RegistrationStatusResponse,
    )
    assert not plugin.registration.registered.is_set()
    assert plugin.registration.last_error == "no"
    with pytest.raises(RuntimeError, match=f"the kubelet refused the {plugin.identity.driver} plugin: no$"):
        plugin.registration.check_registered()

    _call(
        path,
        method,
        registration.RegistrationStatus(plugin_registered=True),
        registration.RegistrationStatusResponse,
    )
    assert plugin.registration.registered.is_set()
    assert plugin.registration.last_error == ""
    plugin.registration.check_registered()  # Ready


def test_the_plugin_is_not_ready_until_the_kubelet_registers_it(plugin: KubeletPlugin) -> None:
    _call(
        plugin.paths.registration,
        "/pluginregistration.Registration/GetInfo",
        registration.InfoRequest(),
        registration.PluginInfo,
    )
    with pytest.raises(RuntimeError, match=r"has not registered the .* plugin yet"):
        plugin.registration.check_registered()


def test_prepare_answers_every_claim_of_the_batch(plugin: KubeletPlugin) -> None:
    request = v1.NodePrepareResourcesRequest(claims=_claims(v1, "ok-a", "bad-b", "silent-c"))
    response = _call(
        plugin.paths.dra,
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        request,
        v1.NodePrepareResourcesResponse,
    )

    assert set(response.claims) == {"uid-ok-a", "uid-bad-b", "uid-silent-c"}
    ok = response.claims["uid-ok-a"]
    assert ok.error == ""
    assert [
        (d.pool_name, d.device_name, list(d.cdi_device_ids), list(d.request_names), d.share_id)
        for d in ok.devices
    ] == [("gpus/n1", "gpu-0000-3b-00-0", ["k8s.gpu.deckhouse.io/claim=uid-ok-a-gpu"], ["gpu"], "share-1")]
    assert response.claims["uid-bad-b"].error == "claim ns/bad-b (uid-bad-b): card busy"
    assert not response.claims["uid-bad-b"].devices
    assert "got no answer" in response.claims["uid-silent-c"].error


def test_a_driver_that_raises_fails_each_claim_not_the_call(plugin: KubeletPlugin) -> None:
    request = v1.NodePrepareResourcesRequest(claims=_claims(v1, "boom", "ok-x"))
    response = _call(
        plugin.paths.dra,
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        request,
        v1.NodePrepareResourcesResponse,
    )

    assert {uid: entry.error for uid, entry in response.claims.items()} == {
        "uid-boom": "prepare failed: backend exploded",
        "uid-ok-x": "prepare failed: backend exploded",
    }


def test_v1beta1_serves_the_same_driver_without_share_ids(plugin: KubeletPlugin) -> None:
    request = v1beta1.NodePrepareResourcesRequest(claims=_claims(v1beta1, "ok-a"))
    response = _call(
        plugin.paths.dra,
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
        request,
        v1beta1.NodePrepareResourcesResponse,
    )

    device = response.claims["uid-ok-a"].devices[0]
    assert device.device_name == "gpu-0000-3b-00-0"
    assert not hasattr(device, "share_id")


@pytest.mark.parametrize(("module", "service"), [(v1, "v1"), (v1beta1, "v1beta1")])
def test_unprepare_answers_every_claim(plugin: KubeletPlugin, module: ModuleType, service: str) -> None:
    request = module.NodeUnprepareResourcesRequest(claims=_claims(module, "ok-a", "bad-b"))
    response = _call(
        plugin.paths.dra,
        f"/k8s.io.kubelet.pkg.apis.dra.{service}.DRAPlugin/NodeUnprepareResources",
        request,
        module.NodeUnprepareResourcesResponse,
    )

    assert {uid: entry.error for uid, entry in response.claims.items()} == {
        "uid-ok-a": "",
        "uid-bad-b": "still in use",
    }


@pytest.mark.parametrize(("module", "package"), [(health_v1, "v1"), (health_v1alpha1, "v1alpha1")])
def test_the_health_stream_sends_the_whole_list_on_every_change(
    plugin: KubeletPlugin, board: HealthBoard, module: ModuleType, package: str
) -> None:
    board.publish(
        [DeviceHealth(pool="gpus/n1", device="gpu-a", status=HealthStatus.HEALTHY, last_updated=100)]
    )
    with grpc.insecure_channel(f"unix://{plugin.paths.dra}") as channel:
        stream = channel.unary_stream(
            f"/{package}.DRAResourceHealth/NodeWatchResources",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=module.NodeWatchResourcesResponse.FromString,
        )(module.NodeWatchResourcesRequest(), timeout=10)
        first = next(stream)
        board.publish(
            [
                DeviceHealth(
                    pool="gpus/n1",
                    device="gpu-a",
                    status=HealthStatus.UNHEALTHY,
                    last_updated=200,
                    message="x" * 2000,
                ),
                DeviceHealth(pool="gpus/n1", device="gpu-b", status=HealthStatus.HEALTHY, last_updated=200),
            ]
        )
        second = next(stream)
        stream.cancel()

    assert [(d.device.device_name, d.health, d.last_updated_time) for d in first.devices] == [
        ("gpu-a", 1, 100)
    ]
    assert [(d.device.device_name, d.health) for d in second.devices] == [("gpu-a", 2), ("gpu-b", 1)]
    assert len(second.devices[0].message) == 1024
    assert second.devices[0].message.endswith("...")


def test_sockets_are_private_and_named_per_instance(plugin: KubeletPlugin, kubelet_root: Path) -> None:
    assert plugin.paths.dra == kubelet_root / "plugins" / DRIVER / "dra-pod-uid-1.sock"
    assert plugin.paths.registration == kubelet_root / "plugins_registry" / f"{DRIVER}-pod-uid-1-reg.sock"
    for path in (plugin.paths.dra, plugin.paths.registration):
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_stopping_removes_the_sockets_so_the_kubelet_deregisters(plugin: KubeletPlugin) -> None:
    plugin.stop()

    assert not plugin.paths.registration.exists()
    assert not plugin.paths.dra.exists()


def test_two_instances_serve_side_by_side(
    plugin: KubeletPlugin, kubelet_root: Path, board: HealthBoard
) -> None:
    second = KubeletPlugin(
        identity=PluginIdentity(driver=DRIVER, instance="pod-uid-2"),
        kubelet_root=kubelet_root,
        driver=RecordingDriver(),
        health=board,
        stop_grace=1.0,
    )
    second.start()
    try:
        for path in (plugin.paths.registration, second.paths.registration):
            info = _call(
                path,
                "/pluginregistration.Registration/GetInfo",
                registration.InfoRequest(),
                registration.PluginInfo,
            )
            assert info.endpoint in (str(plugin.paths.dra), str(second.paths.dra))
    finally:
        second.stop()
    assert plugin.paths.registration.exists()  # the first instance is untouched


def test_sockets_of_a_dead_instance_are_removed_and_live_ones_kept(
    plugin: KubeletPlugin, kubelet_root: Path
) -> None:
    dead = socket_paths(kubelet_root=kubelet_root, driver=DRIVER, instance="killed-pod")
    for path in (dead.dra, dead.registration):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))  # bound, never listening, then closed: what SIGKILL leaves behind
        listener.close()
    mine = socket_paths(kubelet_root=kubelet_root, driver=DRIVER, instance="new-pod")

    removed = remove_dead_sockets(kubelet_root=kubelet_root, driver=DRIVER, keep=mine)

    assert sorted(removed) == sorted([dead.dra, dead.registration])
    assert plugin.paths.dra.exists()
    assert plugin.paths.registration.exists()


def test_socket_names_fit_the_unix_path_limit() -> None:
    uid = "0f3c1d2e-7a44-4b8e-9d51-2c4b6a8e0f13"
    deep = Path("/var/lib/") / ("k" * 30)  # a Pod UID no longer fits in the readable names
    paths = socket_paths(kubelet_root=deep, driver=DRIVER, instance=uid)

    for path in (paths.dra, paths.registration):
        assert len(str(path).encode()) <= GRPC_PATH_MAX
        assert uid not in path.name
    assert paths.registration.name.endswith("-reg.sock")
    assert paths == socket_paths(kubelet_root=deep, driver=DRIVER, instance=uid)  # stable across restarts


def test_starting_without_the_kubelets_folders_says_which_is_missing(kubelet_root: Path) -> None:
    shutil.rmtree(kubelet_root / "plugins_registry")
    plugin = KubeletPlugin(
        identity=PluginIdentity(driver=DRIVER, instance="x"),
        kubelet_root=kubelet_root,
        driver=RecordingDriver(),
        health=HealthBoard(),
    )

    with pytest.raises(FileNotFoundError, match="plugins_registry"):
        plugin.start()


def test_the_board_skips_unchanged_lists_and_watchers_see_the_latest(board: HealthBoard) -> None:
    stop = threading.Event()
    seen: list[tuple[DeviceHealth, ...]] = []
    devices = [DeviceHealth(pool="p", device="d", status=HealthStatus.HEALTHY, last_updated=1)]
    board.publish(devices)
    watcher = board.watch(stop.is_set, poll=0.05)
    seen.append(next(watcher))
    board.publish(devices)  # unchanged: no new version
    board.publish([])
    seen.append(next(watcher))
    stop.set()

    assert seen == [tuple(devices), ()]
    assert list(watcher) == []


def test_grpc_binds_a_socket_of_the_longest_path_we_allow() -> None:
    folder = Path(tempfile.mkdtemp(prefix="kp-"))
    path = folder / ("s" * (GRPC_PATH_MAX - len(str(folder)) - 1))
    assert len(str(path)) == GRPC_PATH_MAX
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    try:
        server.add_insecure_port(f"unix://{path}")
    finally:
        server.stop(0)
        shutil.rmtree(folder, ignore_errors=True)
