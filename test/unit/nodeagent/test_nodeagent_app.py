"""The binary's flags and the composition root's wiring (no API server needed)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from pkg.app.gpu_node_agent import parser, settings_from
from pkg.app.options import parse_duration as _seconds
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.controller.source import PeriodicSource, StartSource
from pkg.framework.manager.manager import Manager
from pkg.nodeagent.internal.source import UdevSource
from pkg.nodeagent.setup import AgentSettings, NodeAgentContainer, setup_agent


def test_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "from-env")
    args = parser().parse_args(["--sysfs-root=/host/sys", "--resync-period=2", "--udev=false"])
    settings = settings_from(args)
    assert settings.node_name == "from-env"
    assert settings.sysfs_root == Path("/host/sys")
    assert settings.host_root == Path("/")
    assert settings.pci_ids is None
    assert settings.resync_period == 2.0
    assert settings.udev is False
    assert settings_from(parser().parse_args(["--node-name=flag"])).node_name == "flag"


def test_node_name_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(SystemExit, match="node-name"):
        settings_from(parser().parse_args([]))


@pytest.mark.parametrize(("text", "seconds"), [("300", 300.0), ("30s", 30.0), ("5m", 300.0), ("250ms", 0.25)])
def test_durations(text: str, seconds: float) -> None:
    assert _seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-1", "0"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        _seconds(text)


@pytest.mark.parametrize("udev", [True, False])
def test_setup_wires_own_node_watches_and_triggers(mocker: Any, udev: bool) -> None:
    client = mocker.Mock(spec=KubeClient)
    client.field_manager = "gpu-node-agent"
    informers = InformerFactory(client)
    settings = AgentSettings(
        node_name="N" * 70,
        sysfs_root=Path("/s"),
        host_root=Path("/"),
        pci_ids=None,
        resync_period=2.0,
        udev=udev,
    )
    container = NodeAgentContainer(settings=settings, client=client, informers=informers)
    manager = Manager()
    controller = setup_agent(manager, container)
    scopes = {(i.kind, i.name) for i in informers.informers()}
    label = settings.node_label
    assert len(label) <= 63
    assert (PHYSICAL_GPU, f"informer-physicalgpu[gpu.deckhouse.io/node={label}]") in scopes
    assert (NODE, f"informer-node[metadata.name={'N' * 70}]") in scopes
    assert len(scopes) == 2  # nothing but this node's objects is listed or watched
    runnables = manager._runnables
    assert controller in runnables
    assert controller.needs_leader_election is False
    sources = [source for source, _listener in controller._generic_sources]
    assert any(isinstance(s, PeriodicSource) and s.every.period == 2.0 for s in sources)
    assert any(isinstance(s, UdevSource) for s in sources) is udev
    assert any(isinstance(s, StartSource) for s in sources)  # the start-up sync
    assert runnables == [controller]  # the sources run inside the controller, not beside it
