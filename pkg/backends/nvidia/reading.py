"""One pass of NVML queries over one card, in NVML's terms, before any API model is built.

Both the status enrichment and the offer input are derived from a :class:`CardReading`, so the
rules about which query may fail how are written once:

* identity (name, memory, UUID) and the driver version are required: a failure of any of them
  raises :class:`~pkg.backends.backend.BackendError` for this card, and nothing is written for it
  until a retry succeeds (a partial snapshot would look like a different card);
* every other value is optional: ``NOT_SUPPORTED`` (or ``NO_PERMISSION``) means the card or driver
  does not offer it and the field is left out (power limits, for one, only when NVML returns
  them); any other error raises, so a transient failure never flaps a field out and back in.

Units are converted here: bytes to MiB, milliwatts to whole watts, NVML's CUDA integer 13000 to
``"13.0"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pkg.backends.errors import BackendError
from pkg.backends.nvidia.architecture import architecture_name
from pkg.backends.nvidia.fabric import FabricFacts, fabric_facts
from pkg.backends.nvidia.mig import MigReading, read_mig
from pkg.backends.nvidia.nvlink import nvlink_domain
from pkg.backends.nvidia.nvml_port import Nvml, NvmlError, if_offered
from pkg.backends.nvidia.profiles import model_for_pci_device

_MIB: Final = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class CardReading:
    address: str
    product_name: str
    memory_mib: int
    uuid: str
    driver_version: str
    cuda_version: str | None
    compute_cap: str | None
    architecture: str | None
    board_part_number: str | None
    power_limit_min_w: int | None
    power_limit_max_w: int | None
    power_limit_current_w: int | None
    power_limit_enforced_w: int | None
    mig: MigReading
    nvlink_domain: str | None = None
    fabric: FabricFacts | None = None


def read_card(nvml: Nvml, address: str, *, pci_device_id: str | None) -> CardReading:
    """Reads the card at ``address``; ``pci_device_id`` finds its built-in MIG tables."""
    try:
        driver_version = nvml.driver_version()
        cuda = if_offered(nvml.cuda_driver_version)
        cc = if_offered(lambda: nvml.cuda_compute_capability(address))
        arch = if_offered(lambda: nvml.architecture(address))
        limits = if_offered(lambda: nvml.power_limit_constraints_mw(address))
        model = model_for_pci_device(pci_device_id) if pci_device_id else None
        fabric = if_offered(lambda: nvml.gpu_fabric_info(address))
        return CardReading(
            address=address,
            product_name=nvml.name(address),
            memory_mib=nvml.memory_total_bytes(address) // _MIB,
            uuid=nvml.uuid(address),
            driver_version=driver_version,
            cuda_version=cuda_version(cuda) if cuda is not None else None,
            compute_cap=f"{cc[0]}.{cc[1]}" if cc is not None else None,
            architecture=architecture_name(arch) if arch is not None else None,
            board_part_number=if_offered(lambda: nvml.board_part_number(address)) or None,
            power_limit_min_w=watts(limits[0]) if limits else None,
            power_limit_max_w=watts(limits[1]) if limits else None,
            power_limit_current_w=_watts_or_none(if_offered(lambda: nvml.power_limit_mw(address))),
            power_limit_enforced_w=_watts_or_none(if_offered(lambda: nvml.enforced_power_limit_mw(address))),
            mig=read_mig(nvml, address, driver_version=driver_version, model=model),
            nvlink_domain=nvlink_domain(nvml, address, fabric=fabric),
            fabric=fabric_facts(fabric),
        )
    except NvmlError as exc:
        raise BackendError(address=address, reason=exc.reason, message=str(exc)) from exc


def cuda_version(value: int) -> str:
    """NVML's CUDA driver version integer as ``major.minor``: 13000 → ``"13.0"``, 12040 → ``"12.4"``."""
    return f"{value // 1000}.{value % 1000 // 10}"


def watts(milliwatts: int) -> int:
    """Milliwatts to whole watts, rounded (165000 → 165)."""
    return round(milliwatts / 1000)


def _watts_or_none(milliwatts: int | None) -> int | None:
    return watts(milliwatts) if milliwatts is not None else None
