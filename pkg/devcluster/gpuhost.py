"""A simulated GPU host: what the kernel and the NVIDIA driver would show of a node's cards.

No GPU is available, so each local node gets a folder that stands in for the parts of its host the
node components read (docs/architecture.md#hardware-behind-narrow-adapters):

* ``root/`` — a fixture sysfs tree (``test/fixtures/sysfs/<scenario>``), which also holds the
  host's ``etc/os-release`` and ``proc/`` files; the NVIDIA driver's files are added here: per card
  ``proc/driver/nvidia/gpus/<address>/information`` (with the card's minor number), and
  ``proc/driver/nvidia-caps/mig-minors``, the table of the device minor of every MIG capability
  (``gpu<N>/gi<G>/access``, ``gpu<N>/gi<G>/ci<C>/access``) that container runtimes read;
* ``dev/`` — the device nodes a real host would have: ``nvidia<minor>`` per card bound to the
  ``nvidia`` driver, ``nvidiactl``, ``nvidia-uvm``, ``nvidia-uvm-tools``, the MIG capability
  nodes ``nvidia-caps/nvidia-cap<minor>`` for every entry of mig-minors (as ``nvidia-modprobe``
  makes them on a real host), and ``vfio/vfio`` plus ``vfio/<group>`` for cards bound to
  ``vfio-pci``. They are real character devices made with mknod, with /dev/null's numbers (1:3),
  so a container given one through CDI can open and write it and the device cgroup is exercised
  for real;
* ``nvml/`` — the simulated NVML's state folder (health overrides, and what the backend records),
  with the driver's host tool ``bin/nvidia-cuda-mps-control``, the stand-in MPS control daemon
  that gpu-handler in a Pod starts on the host (:func:`install_mps_tool`), and ``fabric.json``,
  the multi-node NVLink fabric the host's cards are in (:meth:`SimulatedGpuHost.put_in_fabric`),
  ``lost-cards.json``, the cards that fell off the bus (:meth:`SimulatedGpuHost.unplug_card`), and
  ``driver-version``, the loaded driver's version (:meth:`SimulatedGpuHost.load_driver`).

Minor numbers follow the driver's probe order, which is PCI address order; this module is the
one place that decides them, and the simulated NVML reads them back from the proc file as the
real NVML gets them from the driver.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import stat
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The driver's MPS tool on a simulated host, where the simulated backend runs it from
# (pkg.backends.simulated.sharing.host_tool), and the stand-in daemon it runs.
MPS_TOOL = Path("bin", "nvidia-cuda-mps-control")
MPS_STAND_IN = "pkg.backends.simulated.mps_daemon"
FABRIC_FILE = "fabric.json"  # in the NVML state folder: the host's multi-node NVLink fabric
# In the NVML state folder too (pkg/backends/simulated/host_changes.py and driver_memory.py read
# them; this layer may not import them, and a unit test holds them to one format).
LOST_CARDS_FILE = "lost-cards.json"
DRIVER_VERSION_FILE = "driver-version"
DRIVER_STATE = "driver"  # the simulated driver's state folder: its event log and lock
EVENTS_FILE = "events.jsonl"
EVENTS_LOCK = "driver.lock"
XID_FALLEN_OFF_BUS = 79
EVENT_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
NO_INSTANCE = 0xFFFFFFFF  # an event not tied to a MIG device
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS_PREFIX = "0x03"
_NULL_DEVICE = os.makedev(1, 3)
_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
# The driver numbers MIG capabilities densely: config 1, monitor 2, then per GPU 15 GPU instances
# (IDs 0-14) each followed by its 8 compute instances (IDs 0-7).
MIG_GPU_INSTANCES = 15
MIG_COMPUTE_INSTANCES = 8
_FIRST_MIG_MINOR = 3


def mig_minors(gpu_minors: list[int]) -> dict[str, int]:
    """The entries of ``/proc/driver/nvidia-caps/mig-minors`` for cards with these minor numbers."""
    table = {"config": 1, "monitor": 2}
    per_gpu = MIG_GPU_INSTANCES * (1 + MIG_COMPUTE_INSTANCES)
    for gpu in gpu_minors:
        minor = _FIRST_MIG_MINOR + gpu * per_gpu
        for gi in range(MIG_GPU_INSTANCES):
            table[f"gpu{gpu}/gi{gi}/access"] = minor
            minor += 1
            for ci in range(MIG_COMPUTE_INSTANCES):
                table[f"gpu{gpu}/gi{gi}/ci{ci}/access"] = minor
                minor += 1
    return table


PROC_DEVICES = (
    "Character devices:\n  1 mem\n195 nvidia-frontend\n234 nvidia-caps\n235 nvidia-uvm\n"
    "242 nvidia-caps-imex-channels\n\nBlock devices:\n  8 sd\n"
)


@dataclass(frozen=True)
class SimulatedGpuHost:
    """The folders of one simulated host, under ``base``."""

    base: Path

    @property
    def root(self) -> Path:
        """The sysfs root handed to gpu-node-agent and gpu-handler (``--sysfs-root``)."""
        return self.base / "root"

    @property
    def dev(self) -> Path:
        """Stands in for the host's ``/dev``: CDI specs point their host paths here."""
        return self.base / "dev"

    @property
    def nvml_state(self) -> Path:
        return self.base / "nvml"

    @classmethod
    def create(cls, base: Path, fixture: Path) -> SimulatedGpuHost:
        """Copies the fixture tree and makes the driver's files and device nodes for its cards."""
        host = cls(base)
        shutil.copytree(fixture, host.root, symlinks=True)
        host.nvml_state.mkdir(parents=True, exist_ok=True)
        install_mps_tool(host.nvml_state)
        host.dev.mkdir(parents=True, exist_ok=True)
        # This boot's ID, where the kernel shows it: gpu-handler's checkpoint compares it with the
        # one it recorded (pkg.devcluster.hostreset makes a new one at a simulated reboot).
        boot_id = host.root / "proc" / "sys" / "kernel" / "random" / "boot_id"
        boot_id.parent.mkdir(parents=True, exist_ok=True)
        boot_id.write_text(f"{uuid.uuid4()}\n")
        cards = nvidia_cards(host.root)
        if cards:
            for node in _CONTROL_NODES:
                host.make_device(node)
        for minor, address in enumerate(cards):
            host.make_device(f"nvidia{minor}")
            info = host.root / "proc" / "driver" / "nvidia" / "gpus" / address / "information"
            info.parent.mkdir(parents=True, exist_ok=True)
            info.write_text(f"Model: \t\t simulated\nBus Location: \t {address}\nDevice Minor: \t {minor}\n")
        if cards:
            # The character majors a host with the driver loaded lists; the IMEX channels' major
            # is the one the kubelet plugin makes channel device nodes with (242 on a real host).
            devices = host.root / "proc" / "devices"
            devices.parent.mkdir(parents=True, exist_ok=True)
            devices.write_text(PROC_DEVICES)
            caps = mig_minors(list(range(len(cards))))
            table = host.root / "proc" / "driver" / "nvidia-caps" / "mig-minors"
            table.parent.mkdir(parents=True, exist_ok=True)
            table.write_text("".join(f"{name} {minor}\n" for name, minor in caps.items()))
            for minor in sorted(set(caps.values())):
                host.make_device(f"nvidia-caps/nvidia-cap{minor}")
        groups = vfio_groups(host.root)
        if groups:
            host.make_device("vfio/vfio")
        for group in groups:
            host.make_device(f"vfio/{group}")
        return host

    def make_device(self, relative: str) -> Path:
        """A character device at ``dev/<relative>`` (idempotent)."""
        path = self.dev / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            os.mknod(path, 0o666 | stat.S_IFCHR, _NULL_DEVICE)
            path.chmod(0o666)
        return path

    def device_nodes(self) -> list[Path]:
        return sorted(p for p in self.dev.rglob("*") if p.is_char_device())

    def put_in_fabric(
        self,
        *,
        cluster_uuid: str,
        clique_id: int,
        state: str = "Completed",
        status: int = 0,
        health: Sequence[str] = (),
        addresses: Sequence[str] | None = None,
    ) -> list[str]:
        """Puts the host's cards (``addresses``; None: every NVIDIA card) in a multi-node NVLink
        fabric, as NVML's fabric info will report them: ``state`` NotSupported, NotStarted,
        InProgress or Completed, ``status`` the NVML code registration ended with, ``health`` the
        health mask's faults (DegradedBandwidth, RouteRecovery, RouteUnhealthy,
        AccessTimeoutRecovery, Configuration...). Call again to change or heal them. A running
        gpu-handler sees it at its next enrichment pass of each card. Returns the addresses.

        The file is the simulated NVML's (pkg/backends/simulated/fabric.py reads it; this layer may
        not import it, and a unit test holds the two to one format)."""
        chosen = list(addresses) if addresses is not None else nvidia_cards(self.root)
        path = self.nvml_state / FABRIC_FILE
        try:
            cards = json.loads(path.read_text())
        except FileNotFoundError:
            cards = {}
        for address in chosen:
            cards[address] = {
                "clusterUUID": cluster_uuid,
                "cliqueID": clique_id,
                "state": state,
                "status": status,
                "health": list(health),
            }
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(cards, indent=1, sort_keys=True))
        partial.replace(path)  # a reader sees the old file or the new one, never half of it
        return chosen

    def unplug_card(self, address: str) -> None:
        """The card at ``address`` falls off the PCI bus, as XID 79 on a real host: the driver logs
        the XID (a running gpu-handler's event set delivers it) and every NVML query of the card
        answers ``GPU_IS_LOST`` until :meth:`replug_card`. Its sysfs function stays, as the kernel
        keeps a function that stopped answering until someone removes it; so the node agent still
        lists the card, and only the driver's view changes."""
        self._write_lost(self.lost_cards() | {address})
        self._log_driver_event(
            {
                "address": address,
                "type": EVENT_XID_CRITICAL,
                "data": XID_FALLEN_OFF_BUS,
                "gpuInstance": NO_INSTANCE,
            }
        )

    def replug_card(self, address: str) -> None:
        """The card is back on the bus (re-seated, or the slot reset): NVML answers for it again."""
        self._write_lost(self.lost_cards() - {address})

    def lost_cards(self) -> frozenset[str]:
        """The addresses of the cards off the bus now."""
        try:
            return frozenset(json.loads((self.nvml_state / LOST_CARDS_FILE).read_text()))
        except FileNotFoundError:
            return frozenset()

    def load_driver(self, version: str) -> None:
        """NVML reports ``version`` from now on, as after a driver upgrade's module is loaded (the
        files of the driver's user space are the caller's: :mod:`pkg.devcluster.driverroot`)."""
        _replace(self.nvml_state / DRIVER_VERSION_FILE, f"{version}\n")

    def _write_lost(self, addresses: frozenset[str]) -> None:
        _replace(self.nvml_state / LOST_CARDS_FILE, json.dumps(sorted(addresses)))

    def _log_driver_event(self, record: dict[str, object]) -> None:
        """One line of the simulated driver's event log, under its lock (a reader in another
        process never sees half a line it would take for whole)."""
        folder = self.nvml_state / DRIVER_STATE
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / EVENTS_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with (folder / EVENTS_FILE).open("a") as log:
                log.write(json.dumps(record, sort_keys=True) + "\n")
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)


def _replace(path: Path, content: str) -> None:
    """Writes ``path`` so that a reader sees the old content or the new, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(content)
    partial.replace(path)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _driver(device: Path) -> str:
    link = device / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else ""


def nvidia_cards(sysfs_root: Path) -> list[str]:
    """PCI addresses of NVIDIA display/3D functions bound to the ``nvidia`` driver, in probe order."""
    devices = sysfs_root / "bus" / "pci" / "devices"
    found = []
    for device in sorted(devices.iterdir()) if devices.is_dir() else []:
        if (
            _read(device / "vendor") == NVIDIA_VENDOR
            and _read(device / "class").startswith(DISPLAY_CLASS_PREFIX)
            and _driver(device) == "nvidia"
        ):
            found.append(device.name)
    return found


def vfio_groups(sysfs_root: Path) -> list[str]:
    """IOMMU groups of functions bound to ``vfio-pci``."""
    devices = sysfs_root / "bus" / "pci" / "devices"
    groups = set()
    for device in devices.iterdir() if devices.is_dir() else []:
        group = device / "iommu_group"
        if _driver(device) == "vfio-pci" and group.is_symlink():
            groups.add(os.path.basename(os.readlink(group)))
    return sorted(groups, key=int)


def install_mps_tool(nvml_state: Path, *, python: str = sys.executable) -> Path:
    """Installs a simulated host's ``nvidia-cuda-mps-control``: a script running the stand-in daemon
    with ``python``, an interpreter of this machine that has the project (the driver's tools live on
    the host, not in gpu-handler's image)."""
    tool = nvml_state / MPS_TOOL
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text(f'#!/bin/sh\nexec {shlex.quote(python)} -m {MPS_STAND_IN} "$@"\n')
    tool.chmod(0o755)
    return tool
