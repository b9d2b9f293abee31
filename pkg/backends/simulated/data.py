"""The cards the simulated NVML knows: real models with the values real NVML reports for them.

MIG-capable models (A30, A100 40/80 GB, H100 80 GB, H200, B200) come from the generated tables of
``test/fixtures/facts/mig-profiles.yaml`` (:mod:`pkg.backends.nvidia.profiles`): product name, memory,
architecture, compute capability and every GPU-instance profile with its placements. Cards without MIG, which
that file does not cover, are declared here: the L4, the Tesla T4 (the vGPU host) and the RTX A6000
of the fixture hosts.

Power limits are the ``Min/Max Power Limit`` of public ``nvidia-smi -q`` captures of each model
(the default limit equals the maximum on all of them). Where no capture was found (B200) the
model has none and the simulated NVML answers ``NOT_SUPPORTED``, as real NVML does for a board
without power management; the backend then leaves the fields out. Board part numbers vary per
board revision and are not in the data, so the simulation reports none.

The driver is R580 with CUDA 13.0: a driver that reports MIG profiles while MIG is disabled.

NVLinks per card are those of the SXM boards in NVIDIA's product briefs (A100 SXM4: 12 third-generation
links; H100 SXM5, H200 SXM and B200: 18); PCIe cards here have none. Where they lead is a property
of the host, not the card: :class:`~pkg.backends.simulated.fake_nvml.SimulatedNvml` connects them
to the NVSwitches it finds in the host's sysfs, as an HGX board does.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from pkg.backends.nvidia.profiles import ModelFacts, all_models

DRIVER_VERSION: Final = "580.76.05"
CUDA_DRIVER_VERSION: Final = 13000  # NVML's integer form of CUDA 13.0

_ARCH_TURING: Final = 6  # NVML_DEVICE_ARCH_TURING
_ARCH_AMPERE: Final = 7  # NVML_DEVICE_ARCH_AMPERE
_ARCH_ADA: Final = 8  # NVML_DEVICE_ARCH_ADA

# PCI device ID -> NVLinks of the SXM module.
NVLINKS: Final[Mapping[str, int]] = MappingProxyType(
    {"20b0": 12, "20b2": 12, "2330": 18, "2335": 18, "2901": 18}
)

# PCI device ID -> (min W, max W) from nvidia-smi -q captures.
POWER_LIMITS_W: Final[Mapping[str, tuple[int, int]]] = MappingProxyType(
    {
        "20b7": (100, 165),  # NVIDIA A30
        "20b0": (100, 400),  # NVIDIA A100-SXM4-40GB
        "20b2": (100, 400),  # NVIDIA A100-SXM4-80GB
        "20b5": (150, 300),  # NVIDIA A100 80GB PCIe
        "2330": (200, 700),  # NVIDIA H100 80GB HBM3
        "2335": (200, 700),  # NVIDIA H200
        "27b8": (40, 72),  # NVIDIA L4
        "2230": (100, 300),  # NVIDIA RTX A6000
        "1eb8": (60, 70),  # Tesla T4
    }
)


@dataclass(frozen=True, kw_only=True)
class SimulatedModel:
    """What the simulated NVML reports for a card of PCI device ``pci_device_id`` (vendor 10de).

    ``mig`` holds the MIG tables; ``None`` means the card has no MIG (``NOT_SUPPORTED``).
    """

    pci_device_id: str
    product_name: str
    memory_mib: int
    architecture: int
    compute_capability: tuple[int, int]
    power_limits_w: tuple[int, int] | None
    mig: ModelFacts | None = None
    nvlinks: int = 0


# Cards without MIG: total memory as nvidia-smi prints it (ECC on for the L4 and T4, off by default on
# the RTX A6000), architecture and compute capability from NVIDIA's CUDA GPU list.
_WITHOUT_MIG: Final = (
    SimulatedModel(
        pci_device_id="27b8",
        product_name="NVIDIA L4",
        memory_mib=23034,
        architecture=_ARCH_ADA,
        compute_capability=(8, 9),
        power_limits_w=POWER_LIMITS_W["27b8"],
    ),
    SimulatedModel(
        pci_device_id="1eb8",
        product_name="Tesla T4",
        memory_mib=15360,
        architecture=_ARCH_TURING,
        compute_capability=(7, 5),
        power_limits_w=POWER_LIMITS_W["1eb8"],
    ),
    SimulatedModel(
        pci_device_id="2230",
        product_name="NVIDIA RTX A6000",
        memory_mib=49140,
        architecture=_ARCH_AMPERE,
        compute_capability=(8, 6),
        power_limits_w=POWER_LIMITS_W["2230"],
    ),
)


@functools.cache
def models() -> Mapping[str, SimulatedModel]:
    """Every simulated model by PCI device ID."""
    found = {
        facts.pci_device_id: SimulatedModel(
            pci_device_id=facts.pci_device_id,
            product_name=facts.product_name,
            memory_mib=facts.memory_mib,
            architecture=facts.architecture,
            compute_capability=facts.compute_capability,
            power_limits_w=POWER_LIMITS_W.get(facts.pci_device_id),
            mig=facts,
            nvlinks=NVLINKS.get(facts.pci_device_id, 0),
        )
        for facts in all_models()
    }
    found |= {model.pci_device_id: model for model in _WITHOUT_MIG}
    return MappingProxyType(found)
