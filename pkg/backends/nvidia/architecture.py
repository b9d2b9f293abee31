"""What NVML's architecture number means: the name users know, and the compute types it brings.

``nvmlDeviceGetArchitecture`` answers an ``NVML_DEVICE_ARCH_*`` number; ``capabilities.nvidia``
carries the name as ``nvidia-smi -q`` prints it ("Product Architecture : Ada Lovelace") and the
compute data types of that generation (``capabilities.nvidia.computeTypes``). NVML has no query for the data
types, so they come from this table, one row per architecture: each generation adds to the previous one
(TF32/BF16 with Ampere, FP8 with Ada and Hopper, FP6/FP4 with Blackwell); INT4 tensor-core support
ended with Ampere and Ada. An architecture missing here (Rubin, a future one) gets no name and no
types rather than a guess, so both fields are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

# NVML_DEVICE_ARCH_* values (nvml.h) -> names as nvidia-smi prints them.
ARCHITECTURE_NAMES: Final[Mapping[int, str]] = MappingProxyType(
    {
        2: "Kepler",
        3: "Maxwell",
        4: "Pascal",
        5: "Volta",
        6: "Turing",
        7: "Ampere",
        8: "Ada Lovelace",
        9: "Hopper",
        10: "Blackwell",
    }
)

_PASCAL: Final = ("FP64", "FP32", "FP16")
_TURING: Final = (*_PASCAL, "INT8", "INT4")
_AMPERE: Final = ("FP64", "FP32", "TF32", "BF16", "FP16", "INT8", "INT4")

COMPUTE_TYPES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "Pascal": _PASCAL,
        "Volta": _PASCAL,
        "Turing": _TURING,
        "Ampere": _AMPERE,
        "Ada Lovelace": ("FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "INT8", "INT4"),
        "Hopper": ("FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "INT8"),
        "Blackwell": ("FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "FP6", "FP4", "INT8"),
    }
)


def architecture_name(value: int) -> str | None:
    """The name of NVML architecture ``value``; ``None`` for unknown values."""
    return ARCHITECTURE_NAMES.get(value)


def compute_types(architecture: str | None) -> list[str] | None:
    """The compute data types of ``architecture``; ``None`` (field absent) when not in the table."""
    types = COMPUTE_TYPES.get(architecture or "")
    return list(types) if types else None
