"""What each AMD Instinct model is, keyed by PCI device ID: the facts sysfs does not spell out.

sysfs says which partition modes the driver offers *now* (``available_compute_partition``) and
the card's memory; it does not say how many compute dies (XCDs) the card has, so how big one
partition of a mode is, nor which compute modes a memory partition mode allows. Those are
properties of the model (docs/backends/amd.md "Models"), kept here so the offers of a card do
not depend on the mode it happens to be in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True)
class AmdModel:
    """One model: ``xcds`` compute dies; ``compute_modes`` maps each mode (lower-case, as we
    publish it) to its partition count; ``memory_modes`` maps each memory mode to the compute
    modes it allows. A model without partitioning has no modes."""

    name: str
    architecture: str
    memory_mib: int
    xcds: int = 1
    compute_modes: Mapping[str, int] = field(default_factory=dict)
    memory_modes: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def modes_for(self, memory_mode: str | None) -> dict[str, int]:
        """The compute modes allowed under ``memory_mode`` (all of them when it is unknown)."""
        allowed = self.memory_modes.get(memory_mode or "", frozenset(self.compute_modes))
        return {name: n for name, n in self.compute_modes.items() if name in allowed}


_MI300X_MODES: Final = {"spx": 1, "dpx": 2, "qpx": 4, "cpx": 8}
_MI300X_MEMORY: Final = {
    "nps1": frozenset({"spx", "dpx", "qpx", "cpx"}),
    "nps4": frozenset({"cpx"}),
}

MODELS: Final[Mapping[str, AmdModel]] = MappingProxyType(
    {
        "740f": AmdModel("AMD Instinct MI210", "CDNA2", 64 * 1024),
        "7408": AmdModel("AMD Instinct MI250X", "CDNA2", 64 * 1024),  # one GCD per PCI function
        "740c": AmdModel("AMD Instinct MI250X/MI250", "CDNA2", 64 * 1024),
        "74a1": AmdModel("AMD Instinct MI300X", "CDNA3", 192 * 1024, 8, _MI300X_MODES, _MI300X_MEMORY),
        "74a5": AmdModel("AMD Instinct MI325X", "CDNA3", 256 * 1024, 8, _MI300X_MODES, _MI300X_MEMORY),
        "74a0": AmdModel(
            "AMD Instinct MI300A",
            "CDNA3",
            128 * 1024,
            6,
            {"spx": 1, "tpx": 3, "cpx": 6},
            {"nps1": frozenset({"spx", "tpx", "cpx"})},
        ),
    }
)


def model_of(device_id: str | None) -> AmdModel | None:
    """The model of PCI device ID ``device_id`` (``74a1`` or ``0x74a1``); ``None`` if unknown."""
    if not device_id:
        return None
    return MODELS.get(device_id.lower().removeprefix("0x"))
