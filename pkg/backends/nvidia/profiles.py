"""Built-in facts of real NVIDIA GPU models: identity, memory and the MIG profile tables.

Two users, one source. The NVIDIA backend falls back to these tables when the driver cannot
report MIG profiles: drivers before R550 answer profile and placement queries only while MIG is
enabled, and a card must be offered for MIG before anyone has enabled it. The simulated NVML
answers from the same tables, so what it reports is what real cards report.

The rows are generated from the fact file (``test/fixtures/facts/mig-profiles.yaml``) into
:mod:`pkg.backends.nvidia.mig_tables` by ``hack/generate_mig_tables.py``; this module gives them
types. A model is found by PCI device ID (sysfs and ``status.pciInfo`` carry it, whatever driver is
bound) or by NVML product name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pkg.backends.nvidia.mig_tables import MODELS
from pkg.backends.nvidia.nvml_port import GpuInstanceProfileInfo


@dataclass(frozen=True, kw_only=True)
class ProfileFacts:
    """One GPU-instance profile as NVML reports it: the query index, the info and placements."""

    index: int
    info: GpuInstanceProfileInfo
    placements: tuple[tuple[int, int], ...]


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """One model (one PCI device ID). ``architecture`` is NVML's ``NVML_DEVICE_ARCH_*`` value."""

    key: str
    pci_device_id: str
    product_name: str
    memory_mib: int
    architecture: int
    compute_capability: tuple[int, int]
    memory_slices: int
    compute_slices: int
    profiles: tuple[ProfileFacts, ...]

    def profile_by_index(self, index: int) -> ProfileFacts | None:
        return next((p for p in self.profiles if p.index == index), None)

    def profile_by_id(self, profile_id: int) -> ProfileFacts | None:
        return next((p for p in self.profiles if p.info.id == profile_id), None)


def _profile(row: tuple[Any, ...]) -> ProfileFacts:
    index, profile_id, name, memory, slices, instances, sms, ces, decs, encs, jpegs, ofas, placements = row
    info = GpuInstanceProfileInfo(
        id=profile_id,
        name=name,
        slice_count=slices,
        instance_count=instances,
        memory_mib=memory,
        multiprocessor_count=sms,
        copy_engine_count=ces,
        decoder_count=decs,
        encoder_count=encs,
        jpeg_count=jpegs,
        ofa_count=ofas,
    )
    return ProfileFacts(index=index, info=info, placements=tuple(tuple(p) for p in placements))


@functools.cache
def _models() -> Mapping[str, ModelFacts]:
    by_device: dict[str, ModelFacts] = {}
    for key, variants, memory, arch, cc, memory_slices, compute_slices, rows in MODELS:
        profiles = tuple(_profile(row) for row in rows)
        for device_id, product_name in variants:
            by_device[device_id] = ModelFacts(
                key=key,
                pci_device_id=device_id,
                product_name=product_name,
                memory_mib=memory,
                architecture=arch,
                compute_capability=cc,
                memory_slices=memory_slices,
                compute_slices=compute_slices,
                profiles=profiles,
            )
    return MappingProxyType(by_device)


def all_models() -> tuple[ModelFacts, ...]:
    """Every known model, one per PCI device ID, in table order."""
    return tuple(_models().values())


def model_for_pci_device(device_id: str) -> ModelFacts | None:
    """The model of NVIDIA PCI device ``device_id`` (``"20b7"``, any case), or ``None``."""
    return _models().get(device_id.lower())
