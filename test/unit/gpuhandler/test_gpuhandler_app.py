"""The binary's flags and the composition root's wiring (no API server, simulated backend)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from testutil.unit.gpuhandler.gpuhandler_fakes import SYSFS

from pkg.app.gpu_handler import main, parser, settings_from
from pkg.app.options import parse_duration as _seconds
from pkg.backends.simulated.backend import SimulatedBackend
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.wire import pluginregistration_v1_pb2 as registration
from pkg.framework.manager.manager import Manager
from pkg.gpuhandler.enrichment.setup import ENRICHMENT_CONTROLLER
from pkg.gpuhandler.preparation.setup import PluginSettings
from pkg.gpuhandler.setup import (
    GpuHandlerContainer,
    HandlerSettings,
    setup_handler,
    setup_preparation,
)


def test_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "from-env")
    monkeypatch.setenv("SIM_STATE_DIR", "/run/sim")
    monkeypatch.setenv("POD_UID", "0f3c1d2e-7a44-4b8e-9d51-2c4b6a8e0f13")
    args = parser().parse_args(
        [
            "--backend=simulated-nvidia",
            "--sysfs-root=/host/sys",
            "--dev-root=/host/dev",
            "--enrich-period=5s",
            "--kubelet-root=/k",
            "--cdi-dir=/run/cdi",
            "--prepare-lock-timeout=10s",
        ]
    )
    settings = settings_from(args)
    assert settings == HandlerSettings(
        node_name="from-env",
        backend="simulated-nvidia",
        sysfs_root=Path("/host/sys"),
        dev_root=Path("/host/dev"),
        state_dir=Path("/run/sim"),
        enrich_period=5.0,
        plugin=PluginSettings(
            node_name="from-env",
            kubelet_root=Path("/k"),
            instance="0f3c1d2e-7a44-4b8e-9d51-2c4b6a8e0f13",
            cdi_dir=Path("/run/cdi"),
            lock_timeout=10.0,
            sysfs_root=Path("/host/sys"),
            dev_root=Path("/host/dev"),
        ),
    )
    defaults = settings_from(parser().parse_args(["--node-name=n"]))
    assert (defaults.backend, defaults.enrich_period, defaults.sysfs_root) == ("nvidia", 60.0, Path("/sys"))
    assert defaults.plugin is not None
    assert (defaults.plugin.kubelet_root, defaults.plugin.cdi_dir) == (
        Path("/var/lib/kubelet"),
        Path("/var/run/cdi"),
    )
    assert settings_from(parser().parse_args(["--node-name=n", "--kubelet-plugin=false"])).plugin is None


def test_node_name_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(SystemExit, match="node-name"):
        settings_from(parser().parse_args([]))


@pytest.mark.parametrize("text", ["", "soon", "-1", "0"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        _seconds(text)


def test_an_unknown_backend_stops_the_process_before_it_connects(mocker: Any) -> None:
    runtime = mocker.patch("pkg.app.gpu_handler.RuntimeContainer")
    with pytest.raises(SystemExit, match=r"installed: .*simulated-nvidia"):
        main(["--node-name=n", "--backend=intel"])
    runtime.assert_not_called()


def test_setup_wires_one_informer_of_this_node_and_the_chosen_backend(mocker: Any) -> None:
    client = mocker.Mock(spec=KubeClient)
    client.field_manager = "gpu-handler"
    informers = InformerFactory(client)
    settings = HandlerSettings(
        node_name="N" * 70, backend="simulated-nvidia", sysfs_root=SYSFS / "a30-x2", publish=False
    )  # the publisher's informers: test_gpuhandler_publishing_setup.py
    container = GpuHandlerContainer(
        settings=settings, client=client, informers=informers, recorder=mocker.Mock(spec=EventRecorderLogger)
    )
    manager = Manager()
    setup_handler(manager, container)
    scopes = {(i.kind, i.name) for i in informers.informers()}
    assert scopes == {(PHYSICAL_GPU, f"informer-physicalgpu[gpu.deckhouse.io/node={settings.node_label}]")}
    [controller] = [r for r in manager._runnables if getattr(r, "name", "") == ENRICHMENT_CONTROLLER]
    assert controller.needs_leader_election is False
    assert isinstance(container.backend(), SimulatedBackend)
    assert container.card_specs() is container.card_specs()  # the publisher's hook is one store


def test_the_handler_is_ready_only_once_the_kubelet_registered_its_plugin(
    mocker: Any, tmp_path: Path
) -> None:
    """A DaemonSet rollout stops the old Pod when the new one is Ready: not before the kubelet can call it."""
    client = mocker.Mock(spec=KubeClient)
    client.field_manager = "gpu-handler"
    plugin = PluginSettings(
        node_name="n", kubelet_root=Path("/k"), instance="uid-1", cdi_dir=tmp_path / "cdi"
    )
    settings = HandlerSettings(
        node_name="n", backend="simulated-nvidia", sysfs_root=SYSFS / "a30-x2", publish=False, plugin=plugin
    )
    container = GpuHandlerContainer(
        settings=settings,
        client=client,
        informers=InformerFactory(client),
        recorder=mocker.Mock(spec=EventRecorderLogger),
    )
    manager = Manager()
    preparation = setup_preparation(manager, container)
    assert preparation is not None

    def readiness() -> str | None:
        [result] = [r for r in manager._readyz.run() if r.name == "kubelet-plugin-registered"]
        return result.error

    assert readiness() == "the kubelet has not registered the gpu.deckhouse.io plugin yet"
    preparation.plugin().registration.notify_registration_status(
        registration.RegistrationStatus(plugin_registered=True), mocker.Mock()
    )
    assert readiness() is None
