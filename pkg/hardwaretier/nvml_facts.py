"""What NVML itself says about a card, asked directly, without the backend's rules.

The backend reads a card through :func:`~pkg.backends.nvidia.reading.read_card`, which applies
the project's rules (optional fields, the built-in MIG tables as a fallback). The hardware tier
needs the other side of the comparison: the raw answers, each query made once through the same
NVML port, so that a rule that hides or replaces a real answer shows up as a difference between
:class:`CardFacts` and what ``gpu-handler offers`` publishes (:mod:`.offer_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pkg.backends.nvidia.mig import reported_profiles
from pkg.backends.nvidia.nvml_port import Nvml, NvmlError
from pkg.backends.nvidia.profiles import ProfileFacts

_MIB: Final = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class CardFacts:
    """One card as NVML reports it. ``mig_mode`` is ``None`` on a card without MIG; ``profiles``
    is empty when the driver reports none (before R550 it reports them only with MIG enabled)."""

    address: str
    name: str
    uuid: str
    memory_mib: int
    compute_capability: tuple[int, int]
    mig_mode: int | None
    profiles: tuple[ProfileFacts, ...]


def read_facts(nvml: Nvml, address: str) -> CardFacts:
    """Asks NVML about the card at ``address``; an NVML failure raises, naming the call and card."""
    try:
        mig_mode: int | None = nvml.mig_mode(address)[0]
    except NvmlError as exc:
        if not exc.not_supported:
            raise
        mig_mode = None
    return CardFacts(
        address=address,
        name=nvml.name(address),
        uuid=nvml.uuid(address),
        memory_mib=nvml.memory_total_bytes(address) // _MIB,
        compute_capability=nvml.cuda_compute_capability(address),
        mig_mode=mig_mode,
        profiles=mig_profiles(nvml, address) if mig_mode is not None else (),
    )


def mig_profiles(nvml: Nvml, address: str) -> tuple[ProfileFacts, ...]:
    """Every GPU-instance profile index NVML answers for, with the profile's placements."""
    found = []
    for index, info in reported_profiles(nvml, address):
        placements = tuple(nvml.gpu_instance_possible_placements(address, info.id))
        found.append(ProfileFacts(index=index, info=info, placements=placements))
    return tuple(found)
