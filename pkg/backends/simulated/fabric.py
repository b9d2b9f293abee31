"""The simulated host's multi-node NVLink fabric: what NVML's fabric info says, card by card.

No test machine has a multi-node NVLink system, so a simulated host is *put* in one: the file
``<state-dir>/fabric.json`` maps a card's PCI address to its fabric in plain words, and the
simulated NVML answers ``nvmlDeviceGetGpuFabricInfoV`` for that card from it, read on every call
(so a running gpu-handler sees a change at its next enrichment pass). A card not in the file
answers as before: ``COMPLETED`` with an all-zero cluster UUID on an NVSwitch board, not supported
elsewhere. The file is written by :meth:`pkg.devcluster.gpuhost.SimulatedGpuHost.put_in_fabric`
(which, outside the product layers, writes the same words without importing this module) and by
tests through :func:`write_fabric`::

    {"0000:18:00.0": {"clusterUUID": "…", "cliqueID": 1, "state": "Completed", "status": 0,
                      "health": ["DegradedBandwidth"]}}

``state`` is NVML's registration state by name (NotSupported, NotStarted, InProgress, Completed),
``status`` the ``nvmlReturn_t`` registration ended with, ``health`` the faults of the health mask,
named as :mod:`pkg.backends.nvidia.fabric` names them; each is encoded as NVML encodes it (a fault
TRUE, every other field FALSE, as a healthy GB200 reports it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pkg.backends.nvidia.fabric import CONFIGURATION_FAULTS, HEALTH_FLAGS
from pkg.backends.nvidia.nvml_port import (
    GPU_FABRIC_CONFIGURATION_NONE,
    GPU_FABRIC_HEALTH_FALSE,
    GPU_FABRIC_HEALTH_SHIFT_INCORRECT_CONFIGURATION,
    GPU_FABRIC_HEALTH_TRUE,
    GPU_FABRIC_STATE_COMPLETED,
    GPU_FABRIC_STATE_IN_PROGRESS,
    GPU_FABRIC_STATE_NOT_STARTED,
    GPU_FABRIC_STATE_NOT_SUPPORTED,
    GpuFabricInfo,
)

FABRIC_FILE: Final = "fabric.json"
STATES: Final = {
    "NotSupported": GPU_FABRIC_STATE_NOT_SUPPORTED,
    "NotStarted": GPU_FABRIC_STATE_NOT_STARTED,
    "InProgress": GPU_FABRIC_STATE_IN_PROGRESS,
    "Completed": GPU_FABRIC_STATE_COMPLETED,
}


class FabricFileError(ValueError):
    """The fabric file names a state or a fault NVML does not have; the message names the card."""


@dataclass(frozen=True, kw_only=True)
class CardFabric:
    """One card's fabric as the file describes it."""

    cluster_uuid: str
    clique_id: int
    state: str = "Completed"
    status: int = 0
    health: tuple[str, ...] = ()

    def info(self) -> GpuFabricInfo:
        """What NVML's fabric info call answers for the card."""
        return GpuFabricInfo(
            cluster_uuid=self.cluster_uuid,
            clique_id=self.clique_id,
            state=STATES[self.state],
            status=self.status,
            health_mask=health_mask(self.health),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "clusterUUID": self.cluster_uuid,
            "cliqueID": self.clique_id,
            "state": self.state,
            "status": self.status,
            "health": list(self.health),
        }


def health_mask(faults: Iterable[str]) -> int:
    """The health mask of a card with ``faults``; raises :class:`FabricFileError` for an unknown one."""
    wanted = set(faults)
    mask = 0
    for reason, shift in HEALTH_FLAGS:
        mask |= (GPU_FABRIC_HEALTH_TRUE if reason in wanted else GPU_FABRIC_HEALTH_FALSE) << shift
    configuration = [code for code, reason in CONFIGURATION_FAULTS.items() if reason in wanted]
    mask |= (configuration[0] if configuration else GPU_FABRIC_CONFIGURATION_NONE) << (
        GPU_FABRIC_HEALTH_SHIFT_INCORRECT_CONFIGURATION
    )
    unknown = wanted - {r for r, _ in HEALTH_FLAGS} - set(CONFIGURATION_FAULTS.values())
    if unknown:
        raise FabricFileError(f"unknown fabric health faults {sorted(unknown)}")
    return mask


def read_fabric(path: Path) -> dict[str, CardFabric]:
    """The cards of the file (empty when there is none); raises :class:`FabricFileError` for a
    malformed one, naming the file and the card."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise FabricFileError(f"{path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise FabricFileError(f"{path}: expected an object of cards by PCI address")
    return {address: _card(path, address, entry) for address, entry in raw.items()}


def write_fabric(path: Path, cards: Mapping[str, CardFabric]) -> None:
    """Adds or replaces ``cards`` in the file (atomically: a reader never sees half of it)."""
    current = {a: c.to_json() for a, c in read_fabric(path).items()}
    current |= {a: c.to_json() for a, c in cards.items()}
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(current, indent=1, sort_keys=True))
    partial.replace(path)


def _card(path: Path, address: str, entry: Any) -> CardFabric:
    try:
        card = CardFabric(
            cluster_uuid=str(entry["clusterUUID"]),
            clique_id=int(entry["cliqueID"]),
            state=str(entry.get("state", "Completed")),
            status=int(entry.get("status", 0)),
            health=tuple(str(h) for h in entry.get("health", ())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FabricFileError(f"{path}: card {address}: {exc!r}") from exc
    if card.state not in STATES:
        raise FabricFileError(f"{path}: card {address}: state {card.state!r} is not one of {sorted(STATES)}")
    try:
        health_mask(card.health)
    except FabricFileError as exc:
        raise FabricFileError(f"{path}: card {address}: {exc}") from exc
    return card
