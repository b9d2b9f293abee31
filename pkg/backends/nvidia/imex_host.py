"""What a node's host says about IMEX channels, read once per publish.

Two facts decide whether this node may offer IMEX channels to compute domains:

* **the channel major**: the driver registers the ``nvidia-caps-imex-channels`` character device
  when it supports IMEX; its major, from ``/proc/devices``, is what a channel's device node
  ``/dev/nvidia-caps-imex-channels/channel<N>`` is made with (minor ``N``). A host that lists none
  has no channels to give;
* **a host-installed IMEX service**: NVIDIA's IMEX package registers a systemd service
  ``nvidia-imex`` (https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/gettingstarted.html).
  Such a daemon serves every process on the node under its own configuration, so the daemons our
  controller runs per compute domain would fight it over the same channels. It is found by a
  running ``nvidia-imex`` process in the host's ``/proc`` (the handler runs with hostPID) or by the
  unit enabled in ``<host>/etc/systemd/system/*.wants/nvidia-imex.service`` (stopped now, back on
  the next boot).

Reading is best effort and never raises: a file that cannot be read is a fact that is not there.
:class:`ImexChannelNodes` makes and removes the channels' device nodes for Prepare and Release.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.hardware.files import read_text
from pkg.hardware.proc_devices import character_major

IMEX_CHANNELS_DEVICE: Final = "nvidia-caps-imex-channels"
IMEX_SERVICE: Final = "nvidia-imex"
_UNIT: Final = f"{IMEX_SERVICE}.service"
_COMM_LIMIT: Final = 64


@dataclass(frozen=True)
class ImexHost:
    """``channel_major``: None when the driver offers no channels; ``host_service``: where a
    host-installed IMEX service was seen (a process or a unit file), None when none was."""

    channel_major: int | None
    host_service: str | None = None


@dataclass(frozen=True)
class ImexHostReader:
    """Reads :class:`ImexHost` from the host's ``/proc`` (``proc_root``), the ``/proc`` of the
    host's PID namespace (``processes_proc``) and the host's root file system (``host_root``)."""

    proc_root: Path
    processes_proc: Path
    host_root: Path

    def read(self) -> ImexHost:
        return ImexHost(
            channel_major=character_major(self.proc_root, IMEX_CHANNELS_DEVICE),
            host_service=self._running() or self._enabled(),
        )

    def _running(self) -> str | None:
        try:
            entries = list(os.scandir(self.processes_proc))
        except OSError:
            return None
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                comm = read_text(Path(entry.path) / "comm", limit=_COMM_LIMIT, encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue  # gone meanwhile, or not ours to read
            if comm == IMEX_SERVICE:
                return f"a running {IMEX_SERVICE} process (pid {entry.name})"
        return None

    def _enabled(self) -> str | None:
        system = self.host_root / "etc" / "systemd" / "system"
        try:
            wants = sorted(
                p for p in system.glob("*.wants") if (p / _UNIT).exists() or (p / _UNIT).is_symlink()
            )
        except OSError:
            return None
        if wants:
            return f"the systemd unit {_UNIT} enabled in /etc/systemd/system/{wants[0].name}"
        return None


CHANNEL_FOLDER: Final = IMEX_CHANNELS_DEVICE  # /dev/nvidia-caps-imex-channels/channel<N>


class ChannelNodeError(OSError):
    """A channel's device node cannot be made: no major, or mknod failed; the message says which."""


class ImexChannelNodes:
    """The host's channel device nodes under ``dev_root``: made with the major ``/proc/devices``
    lists (``proc_root``) and minor ``N``, as the driver's own tools make them."""

    def __init__(
        self, *, dev_root: Path, proc_root: Path, mknod: Callable[[Path, int, int], None] | None = None
    ) -> None:
        self._dev = dev_root
        self._proc = proc_root
        self._mknod = mknod or _mknod

    def path(self, channel: int) -> Path:
        return self._dev / CHANNEL_FOLDER / f"channel{channel}"

    def container_path(self, channel: int) -> str:
        return f"/dev/{CHANNEL_FOLDER}/channel{channel}"

    def make(self, channel: int) -> Path:
        """The channel's node, made if missing (idempotent)."""
        path = self.path(channel)
        if path.is_char_device():
            return path
        major = character_major(self._proc, IMEX_CHANNELS_DEVICE)
        if major is None:
            raise ChannelNodeError(f"{self._proc / 'devices'} lists no {IMEX_CHANNELS_DEVICE} device")
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            self._mknod(path, major, channel)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ChannelNodeError(f"cannot make {path}: {exc}") from exc
        return path

    def remove(self, channel: int) -> bool:
        """Removes the channel's node; False when it was already gone."""
        try:
            self.path(channel).unlink()
        except FileNotFoundError:
            return False
        return True

    def present(self) -> list[int]:
        """The channels whose nodes exist, in order."""
        folder = self._dev / CHANNEL_FOLDER
        found = []
        for entry in folder.iterdir() if folder.is_dir() else []:
            number = entry.name.removeprefix("channel")
            if entry.name.startswith("channel") and number.isdigit():
                found.append(int(number))
        return sorted(found)


def _mknod(path: Path, major: int, minor: int) -> None:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
