"""What a node's hardware and files hold, read the way an operator would look at a real node.

The soak checks our components from outside: not what gpu-handler believes it made, but what the
simulated hardware's own state and the node's folders show. Per node:

* MIG GPU and compute instances: the simulated driver's state file (``<nvml state>/driver/
  driver.json``), as ``nvidia-smi mig -lgi`` / ``-lci`` would list them;
* mdevs: ``bus/mdev/devices/<uuid>`` of the host's sysfs tree, each with its parent card;
* vfio bindings: PCI functions whose ``driver`` link names ``vfio-pci``;
* MPS control daemons: a PID file under gpu-handler's MPS folder whose process lives and is the
  daemon (a PID file of a killed daemon is no daemon);
* CDI specs of claims: ``k8s.gpu.deckhouse.io-claim_<claim UID>.json`` in the node's CDI folder;
* checkpoint records: the claims of ``<kubelet root>/plugins/gpu.deckhouse.io/checkpoint.json``;
* IMEX channel nodes: ``<dev>/nvidia-caps-imex-channels/channel<N>``.

Each is a :class:`HostObject` naming its claim's UID when the object itself does (a CDI spec, a
checkpoint record), else the card it sits on: :mod:`soak.invariants` decides who owns it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.gpuhost import SimulatedGpuHost

DRIVER: Final = "gpu.deckhouse.io"
CLAIM_SPEC_PREFIX: Final = "k8s.gpu.deckhouse.io-claim_"
MPS_PID_FILE: Final = "nvidia-cuda-mps-control.pid"
MPS_DAEMON_MARKER: Final = b"pkg.backends.simulated.mps_daemon"
IMEX_CHANNELS: Final = "nvidia-caps-imex-channels"


@dataclass(frozen=True)
class HostObject:
    """One thing on a node that some claim must own: ``kind`` (``mig-gi``, ``mig-ci``, ``mdev``,
    ``vfio``, ``mps-daemon``, ``cdi-spec``, ``checkpoint``, ``imex-channel``), an ``id`` unique
    among the node's objects of that kind, the claim UID it names (if it names one) and its card."""

    node: str
    kind: str
    id: str
    owner: str | None = None
    card: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.node, self.kind, self.id)


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps what :func:`read_node` reads."""

    node: str
    host: SimulatedGpuHost
    cdi_dir: Path
    kubelet_root: Path
    mps_root: Path

    @classmethod
    def of(cls, components: GpuComponents) -> NodePaths:
        node = components.node
        return cls(
            node=node.name,
            host=node.host,
            cdi_dir=node.cdi_dir,
            kubelet_root=node.kubelet.paths.root,
            mps_root=components.mps_root,
        )

    @property
    def checkpoint(self) -> Path:
        return self.kubelet_root / "plugins" / DRIVER / "checkpoint.json"


def mig_placement(card: str, start: object) -> str:
    """Names a MIG placement on a card, as host objects and the owners' index both spell it."""
    return f"{card}@{start}"


def read_node(paths: NodePaths) -> list[HostObject]:
    """Every object of the node, in a stable order. Files that vanish while read are skipped:
    the node is live, and the next snapshot sees what became of them."""
    found = [
        *_mig(paths),
        *_mdevs(paths),
        *_vfio(paths),
        *_mps(paths),
        *_cdi_specs(paths),
        *_checkpoint(paths),
        *_imex_channels(paths),
    ]
    return sorted(found, key=lambda o: o.key)


def _mig(paths: NodePaths) -> Iterator[HostObject]:
    state = _json(paths.host.nvml_state / "driver" / "driver.json")
    for card, record in (state or {}).get("cards", {}).items():
        for gi in record.get("gpu_instances") or []:
            placement = mig_placement(card, gi["start"])
            yield HostObject(paths.node, "mig-gi", f"{placement}/gi{gi['id']}", card=card)
            for ci in gi.get("compute_instances") or []:
                yield HostObject(paths.node, "mig-ci", f"{placement}/gi{gi['id']}/ci{ci['id']}", card=card)


def _mdevs(paths: NodePaths) -> Iterator[HostObject]:
    folder = paths.host.root / "bus" / "mdev" / "devices"
    for entry in _listing(folder):
        parent = Path(os.path.realpath(entry)).parent.name
        yield HostObject(paths.node, "mdev", entry.name, card=parent)


def _vfio(paths: NodePaths) -> Iterator[HostObject]:
    for device in _listing(paths.host.root / "bus" / "pci" / "devices"):
        link = device / "driver"
        if link.is_symlink() and os.path.basename(os.readlink(link)) == "vfio-pci":
            yield HostObject(paths.node, "vfio", device.name, card=device.name)


def _mps(paths: NodePaths) -> Iterator[HostObject]:
    for card in _listing(paths.mps_root):
        try:
            pid = int((card / "pipe" / MPS_PID_FILE).read_text().strip())
            cmdline = Path("/proc", str(pid), "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if MPS_DAEMON_MARKER in cmdline:
            yield HostObject(paths.node, "mps-daemon", f"{card.name}/pid{pid}", card=card.name)


def _cdi_specs(paths: NodePaths) -> Iterator[HostObject]:
    for spec in _listing(paths.cdi_dir):
        if spec.name.startswith(CLAIM_SPEC_PREFIX) and spec.suffix == ".json":
            uid = spec.name.removeprefix(CLAIM_SPEC_PREFIX).removesuffix(".json")
            yield HostObject(paths.node, "cdi-spec", spec.name, owner=uid)


def _checkpoint(paths: NodePaths) -> Iterator[HostObject]:
    envelope = _json(paths.checkpoint)
    for uid, record in ((envelope or {}).get("data") or {}).get("claims", {}).items():
        cards = sorted({str(d.get("card")) for d in record.get("devices") or []})
        yield HostObject(paths.node, "checkpoint", uid, owner=uid, card=",".join(cards) or None)


def _imex_channels(paths: NodePaths) -> Iterator[HostObject]:
    for channel in _listing(paths.host.dev / IMEX_CHANNELS):
        if channel.name.startswith("channel"):
            yield HostObject(paths.node, "imex-channel", channel.name.removeprefix("channel"))


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent, or replaced while read: the next snapshot reads it whole
