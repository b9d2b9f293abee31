"""The host's IMEX facts and channel device nodes, from a host tree in a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pkg.backends.nvidia.imex_host import ChannelNodeError, ImexChannelNodes, ImexHost, ImexHostReader

DEVICES = "Character devices:\n195 nvidia-frontend\n242 nvidia-caps-imex-channels\n"


def _reader(tmp_path: Path) -> ImexHostReader:
    for folder in ("proc", "pids", "host"):
        (tmp_path / folder).mkdir(exist_ok=True)
    return ImexHostReader(
        proc_root=tmp_path / "proc", processes_proc=tmp_path / "pids", host_root=tmp_path / "host"
    )


def test_a_driver_with_channels_and_no_service_gives_the_major(tmp_path: Path) -> None:
    reader = _reader(tmp_path)
    (tmp_path / "proc" / "devices").write_text(DEVICES)
    (tmp_path / "pids" / "17").mkdir()
    (tmp_path / "pids" / "17" / "comm").write_text("containerd\n")

    assert reader.read() == ImexHost(channel_major=242, host_service=None)


def test_a_host_without_the_channel_device_has_no_major(tmp_path: Path) -> None:
    reader = _reader(tmp_path)
    (tmp_path / "proc" / "devices").write_text("Character devices:\n195 nvidia-frontend\n")

    assert reader.read().channel_major is None


def test_a_running_imex_daemon_is_a_host_service(tmp_path: Path) -> None:
    reader = _reader(tmp_path)
    (tmp_path / "pids" / "4242").mkdir()
    (tmp_path / "pids" / "4242" / "comm").write_text("nvidia-imex\n")

    assert reader.read().host_service == "a running nvidia-imex process (pid 4242)"


def test_an_enabled_unit_is_a_host_service_even_when_stopped(tmp_path: Path) -> None:
    reader = _reader(tmp_path)
    wants = tmp_path / "host" / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir(parents=True)
    os.symlink("/usr/lib/systemd/system/nvidia-imex.service", wants / "nvidia-imex.service")  # dangling here

    found = reader.read().host_service

    assert found is not None
    assert "nvidia-imex.service" in found
    assert "multi-user.target.wants" in found


def test_channel_nodes_are_made_with_the_listed_major_once_and_removed(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "devices").write_text(DEVICES)
    made: list[tuple[Path, int, int]] = []

    def mknod(path: Path, major: int, minor: int) -> None:
        made.append((path, major, minor))
        path.write_text("")

    nodes = ImexChannelNodes(dev_root=tmp_path / "dev", proc_root=tmp_path / "proc", mknod=mknod)

    path = nodes.make(7)

    assert path == tmp_path / "dev" / "nvidia-caps-imex-channels" / "channel7"
    assert made == [(path, 242, 7)]
    assert nodes.container_path(7) == "/dev/nvidia-caps-imex-channels/channel7"
    assert nodes.present() == [7]
    assert nodes.remove(7) is True
    assert nodes.remove(7) is False  # already gone
    assert nodes.present() == []


def test_no_major_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    nodes = ImexChannelNodes(dev_root=tmp_path / "dev", proc_root=tmp_path / "proc")

    with pytest.raises(ChannelNodeError, match="lists no nvidia-caps-imex-channels"):
        nodes.make(1)
