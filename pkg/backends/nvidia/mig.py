"""Reading a card's MIG support, mode and GPU-instance profiles, with the table fallback.

The rules, in order:

1. ``nvmlDeviceGetMigMode`` answering ``NOT_SUPPORTED`` means the card has no MIG: the caller
   writes ``migSupported: false`` and no ``mig`` block at all. Any other error
   leaves the mode unread (no ``currentState.nvidia.mig``); whether MIG is supported is then taken
   from the built-in tables, and a card missing from them raises (nothing is known).
2. Profiles come from NVML when the driver can answer: drivers from R550 on report profiles and
   placements with MIG disabled; older ones only while MIG is enabled. NVML is asked for each
   profile index 0..17 (``nvmlDeviceGetGpuInstanceProfileInfoV``; an index the card lacks answers
   ``NOT_SUPPORTED`` or ``INVALID_ARGUMENT``), then for the placements of each profile ID.
3. Otherwise, or when those queries fail, the built-in tables of the model (by PCI device ID)
   answer. A model missing from the tables then has MIG without known profiles: ``migSupported``
   is true and the ``mig`` block is absent, which the schema allows.

Profiles are ordered smallest first (slices, memory, name), as offers are.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Final, Literal

from api.gpu.v1alpha1 import MigMode
from pkg.backends.nvidia.nvml_port import (
    GPU_INSTANCE_PROFILE_COUNT,
    MIG_DISABLED,
    MIG_ENABLED,
    GpuInstanceProfileInfo,
    Nvml,
    NvmlError,
    NvmlReturn,
)
from pkg.backends.nvidia.profiles import ModelFacts, ProfileFacts

logger = logging.getLogger(__name__)

FIRST_DRIVER_WITH_PROFILES_WHILE_DISABLED: Final = 550
_ABSENT_PROFILE: Final = frozenset(
    {NvmlReturn.NOT_SUPPORTED, NvmlReturn.INVALID_ARGUMENT, NvmlReturn.NOT_FOUND}
)
_DRIVER_MAJOR = re.compile(r"^(\d+)\.")


@dataclass(frozen=True, kw_only=True)
class MigReading:
    """``mode`` is ``None`` when it could not be read; ``profiles`` is empty when unknown."""

    supported: bool
    mode: MigMode | None = None
    profiles: tuple[ProfileFacts, ...] = ()
    source: Literal["nvml", "table", "none"] = "none"

    @property
    def total_slices(self) -> int:
        """Compute slices of the card: those of its largest profile (4 on A30, 7 on A100)."""
        return max((p.info.slice_count for p in self.profiles), default=0)


def read_mig(nvml: Nvml, address: str, *, driver_version: str, model: ModelFacts | None) -> MigReading:
    """The MIG facts of the card at ``address`` by the rules above; raises :class:`NvmlError`."""
    try:
        current, _pending = nvml.mig_mode(address)
    except NvmlError as exc:
        if exc.not_supported:
            return MigReading(supported=False)
        if model is None:
            raise
        logger.warning("MIG mode unreadable; support taken from the model tables: %s", exc)
        mode = None
    else:
        mode = _MODES.get(current, MigMode.UNKNOWN)
    if _driver_answers(driver_version) or mode is MigMode.ENABLED:
        try:
            queried = query_profiles(nvml, address, model=model)
        except NvmlError as exc:
            logger.warning("MIG profile query failed; using the model tables: %s", exc)
        else:
            if queried:
                return MigReading(supported=True, mode=mode, profiles=queried, source="nvml")
    if model is not None and model.profiles:
        return MigReading(supported=True, mode=mode, profiles=_ordered(model.profiles), source="table")
    return MigReading(supported=True, mode=mode)


def reported_profiles(nvml: Nvml, address: str) -> Iterator[tuple[int, GpuInstanceProfileInfo]]:
    """Each GPU-instance profile index NVML answers for, with its answer as reported (an index the
    card has no profile for is skipped)."""
    for index in range(GPU_INSTANCE_PROFILE_COUNT):
        try:
            yield index, nvml.gpu_instance_profile_info(address, index)
        except NvmlError as exc:
            if exc.code not in _ABSENT_PROFILE:
                raise


def query_profiles(nvml: Nvml, address: str, *, model: ModelFacts | None) -> tuple[ProfileFacts, ...]:
    """Every GPU-instance profile the card reports, with its placements."""
    found = []
    for index, reported in reported_profiles(nvml, address):
        info = reported
        if not info.name:  # a v1-only driver: the name comes from the tables
            known = model.profile_by_id(info.id) if model else None
            name = known.info.name if known else f"{info.slice_count}g.{round(info.memory_mib / 1024)}gb"
            info = replace(info, name=name)
        placements = tuple(nvml.gpu_instance_possible_placements(address, info.id))
        found.append(ProfileFacts(index=index, info=info, placements=placements))
    return _ordered(found)


def _ordered(profiles: tuple[ProfileFacts, ...] | list[ProfileFacts]) -> tuple[ProfileFacts, ...]:
    return tuple(sorted(profiles, key=lambda p: (p.info.slice_count, p.info.memory_mib, p.info.name)))


def _driver_answers(driver_version: str) -> bool:
    """Whether the driver reports profiles with MIG disabled (R550+); unparsable counts as new."""
    match = _DRIVER_MAJOR.match(driver_version)
    return match is None or int(match.group(1)) >= FIRST_DRIVER_WITH_PROFILES_WHILE_DISABLED


_MODES: Final[dict[int, MigMode]] = {MIG_DISABLED: MigMode.DISABLED, MIG_ENABLED: MigMode.ENABLED}
